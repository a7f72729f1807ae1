"""One report directory per run, never an earlier run's.

A run's directory is chosen when its test starts (each web-UI Start, each headless run), not
when the process starts: ``reports/<UTC start time>`` by default, else ``--report-dir D``. A
candidate is taken when it does not exist or is an empty directory, and this process has not
used it for an earlier run; otherwise ``D-2``, ``D-3`` … are tried in turn. The directory is
created at once, so a later start (of this or another process) sees it as taken.

Workers do not choose: the master sends its choice in the run configuration
(run/runconfig.py), and they write their raw logs there.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Collection

MAX_SUFFIX = 10_000  # D-2 … D-9999: past that something is wrong (a loop writing runs), say so


def default_report_dir(now: float | None = None) -> str:
    """reports/<UTC timestamp> of a run starting ``now``."""
    return time.strftime("reports/%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))


def claim_report_dir(given: str | None, used: Collection[str] = (), now: float | None = None) -> str:
    """The directory a run starting now writes into (created); see the module docstring.

    ``given``: --report-dir as given ("" or None: the default timestamped name). ``used``: the
    absolute paths of the directories this process's earlier runs took. OSError (with the
    path) when the directory cannot be created.
    """
    base = (given or "").rstrip("/\\") or default_report_dir(now)
    for n in itertools.count(1):
        candidate = base if n == 1 else f"{base}-{n}"
        if n > MAX_SUFFIX:
            raise OSError(f"--report-dir {base}: {base} and {base}-2 … {base}-{MAX_SUFFIX} are all taken")
        if os.path.abspath(candidate) in used:
            continue
        try:
            os.makedirs(candidate)
            return candidate
        except FileExistsError:
            if os.path.isdir(candidate) and not os.listdir(candidate):
                return candidate  # an empty directory made for this run (mkdir, a test's tmp dir)
    raise AssertionError("unreachable")
