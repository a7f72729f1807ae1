"""Where a run is in its stage plan: the stage a moment belongs to, by elapsed time.

Pure functions of the plan (a list of stage dicts with ``name`` and ``duration_s``), shared by
the Locust load shape (locust/shape.py) and the schedules (locust/schedules.py).
"""

from __future__ import annotations

from typing import Any

MEASURED = "main"  # the stage after a warm-up when the scenario has none (open loop names it so too)


def stage_at(plan: list[dict[str, Any]], elapsed_s: float) -> str | None:
    """The name of the stage running `elapsed_s` into the run (None past the end)."""
    start = 0.0
    for stage in plan:
        start += stage_duration(stage)
        if elapsed_s < start:
            return str(stage["name"])
    return None


def stage_duration(stage: dict[str, Any]) -> float:
    """A stage's seconds; None (the measured stage of a run without -t): until the run stops."""
    duration = stage.get("duration_s")
    return float("inf") if duration is None else float(duration)
