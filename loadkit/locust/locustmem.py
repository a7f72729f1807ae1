"""Keep Locust's own per-second bookkeeping bounded over long runs.

Locust keeps, for every request name and for the total, a dict of request and failure
counts per Unix second (`num_reqs_per_sec`, `num_fail_per_sec`) and appends a chart row to
`stats.history` every 5 s, for the life of the process. Nothing in Locust reads the
per-second counts further back than ~12 s (current RPS and failures/s); the history feeds
the web UI's charts and Locust's HTML report. On a one-hour soak these were a visible part
of the memory growth (docs/performance.md, Soak), so every TRIM_EVERY_S we:

- drop per-second counts older than KEEP_SECONDS (totals are kept in separate counters and
  are untouched);
- thin `stats.history` once it passes HISTORY_MAX rows: the newest half keeps every row, the
  older half keeps every other one, so a chart of any length keeps its shape in bounded rows;
- every TRIM_HEAP_EVERY_S, hand free heap pages back to the OS (glibc ``malloc_trim``): glibc
  keeps freed space mapped, and RSS crept up while live Python objects stayed flat
  (tracemalloc; docs/performance.md, Soak) — mostly from reads that allocated 64 KiB and
  shrank it, which hub reads no longer do (``hubreads``); plain reads (error bodies, drains)
  still do. ``LOADKIT_MALLOC_TRIM=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from typing import Any

KEEP_SECONDS = 60
HISTORY_MAX = 720  # one hour at Locust's 5-second history interval
TRIM_EVERY_S = 10.0
TRIM_HEAP_EVERY_S = 60.0


def heap_trimmer() -> Callable[[], int] | None:
    """glibc's malloc_trim(0), or None where there is no glibc (or it is turned off)."""
    if os.environ.get("LOADKIT_MALLOC_TRIM", "1") == "0":
        return None
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: int(trim(0))


def trim_per_second(stats: Any, now: float | None = None) -> int:
    """Delete per-second counts older than KEEP_SECONDS from every entry; return how many."""
    horizon = int(now if now is not None else time.time()) - KEEP_SECONDS
    removed = 0
    entries = list(getattr(stats, "entries", {}).values()) + [stats.total]
    for entry in entries:
        for table in (entry.num_reqs_per_sec, entry.num_fail_per_sec):
            old = [t for t in table if t < horizon]
            for t in old:
                del table[t]
            removed += len(old)
    return removed


def thin_history(history: list[Any], limit: int = HISTORY_MAX) -> None:
    """Halve the resolution of the older half of `history` in place once it passes `limit`."""
    if len(history) <= limit:
        return
    keep_whole = limit // 2
    older, newer = history[: len(history) - keep_whole], history[len(history) - keep_whole :]
    history[:] = older[::2] + newer


def install(environment: Any) -> None:
    """Trim on a timer on every node (a master's dicts merge its workers' seconds)."""
    import gevent

    trim_heap = heap_trimmer()

    def loop() -> None:
        last_heap_trim = time.monotonic()
        while True:
            gevent.sleep(TRIM_EVERY_S)
            stats = getattr(environment, "stats", None)
            if stats is not None:
                trim_per_second(stats)
                thin_history(stats.history)
            if trim_heap is not None and time.monotonic() - last_heap_trim >= TRIM_HEAP_EVERY_S:
                trim_heap()  # ~1 ms: walks glibc's free lists once a minute
                last_heap_trim = time.monotonic()

    if getattr(environment, "_loadkit_trim", None) is None:
        environment._loadkit_trim = gevent.spawn(loop)
