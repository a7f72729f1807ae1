"""This process's wall clock as the run's figures use it: Unix time plus a correction.

Every figure that puts several nodes' times on one timeline (windows and rates, the delivered
section, tenants' spans, the time series) turns each node's monotonic times into wall-clock
times with an offset taken once. On a worker on another host, the correction is the measured
offset of the master's clock from the worker's (locust/rawshipping.py), set at the worker's test
start, so those times are on the master's clock within the estimate's uncertainty. 0 elsewhere.
"""

from __future__ import annotations

import time

_correction_ns = 0


def set_correction(ns: int) -> None:
    """Add ``ns`` to this process's wall clock for the figures (fixed for a run: set at its start)."""
    global _correction_ns
    _correction_ns = int(ns)


def correction_ns() -> int:
    return _correction_ns


def now_ns() -> int:
    """Unix ns, corrected."""
    return time.time_ns() + _correction_ns


def wall_offset_ns() -> int:
    """monotonic (perf_counter) ns + this = corrected Unix ns."""
    return time.time_ns() - time.perf_counter_ns() + _correction_ns
