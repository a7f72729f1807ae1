"""The names of the simulator's profiles (``loadkit sim --profile``, docs/simulator.md).

Shared vocabulary one layer below both users: a scenario's ``[sim] profile`` is checked against
these names when the file is parsed (``loadkit/workload/scenario.py``), and the simulator's
``PROFILES`` (``loadkit/sim/config.py``) define exactly these, in this order (checked there at
import), so the workload never imports the simulator."""

from __future__ import annotations

PROFILE_NAMES: tuple[str, ...] = ("default", "fast", "big", "long")
