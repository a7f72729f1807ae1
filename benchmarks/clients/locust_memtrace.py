"""loadkit's locustfile plus a tracemalloc comparison, to attribute memory growth in a soak.

A snapshot is taken ``LOADKIT_MEMTRACE_WARMUP_S`` after the test starts (default 180 s) and
compared with one at test stop; the top growing allocation sites go to
``LOADKIT_MEMTRACE_OUT`` (default memtrace.txt). Run with PYTHONTRACEMALLOC=5.

    PYTHONTRACEMALLOC=5 python benchmarks/soak.py --locustfile benchmarks/clients/locust_memtrace.py ...
"""

import os
import tracemalloc
from typing import Any

import gevent
from locust import events

from loadkit.locust.locustfile import LLM  # noqa: F401  (Locust collects User classes by name)

_state: dict[str, Any] = {}


def _snapshot() -> None:
    _state["base"] = tracemalloc.take_snapshot()


def _series() -> None:
    """Every 30 s: Python-traced bytes beside RSS, to tell object growth from heap growth."""
    import json
    import time

    import psutil

    proc = psutil.Process()
    path = os.environ.get("LOADKIT_MEMTRACE_OUT", "memtrace.txt") + ".series.jsonl"
    t0 = time.monotonic()
    with open(path, "w") as fh:
        while True:
            traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
            row = {"t_s": round(time.monotonic() - t0), "traced_mib": round(traced / 2**20, 3),
                   "rss_mib": round(proc.memory_info().rss / 2**20, 2)}  # fmt: skip
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            gevent.sleep(30)


@events.test_start.add_listener
def _start(**_kw: Any) -> None:
    gevent.spawn(_series)
    if tracemalloc.is_tracing():
        gevent.spawn_later(float(os.environ.get("LOADKIT_MEMTRACE_WARMUP_S", "180")), _snapshot)


@events.test_stop.add_listener
def _stop(**_kw: Any) -> None:
    base = _state.get("base")
    if base is None:
        return
    diff = tracemalloc.take_snapshot().compare_to(base, "lineno")
    with open(os.environ.get("LOADKIT_MEMTRACE_OUT", "memtrace.txt"), "w") as fh:
        for stat in diff[:25]:
            fh.write(f"{stat}\n")
