"""Long bookkeeping gives the event loop its turn, so it never holds token reads back.

A Locust process reads every stream on one event loop. Anything that keeps the loop for
longer than a decode step leaves sockets unread while their next token arrives; a read that
then holds two events knows one arrival time for both, and the earlier one is stamped late
(docs/self-check.md, Stalls). The live report behind the headless console table, the web
UI's LLM view and a worker's periodic snapshot are such work: at 1 user they took 7–11 ms
on this 2-core machine (merging and flushing ~50 histograms, then ~150 percentile
summaries), and the self-check rightly flagged the one ITL sample each table spoiled by a
whole 5 ms decode step.

Such work runs ``with cooperative():`` and calls ``give_way()`` between units of work that
leave the data consistent (one histogram flushed, one group merged, one summary taken).
``give_way()`` yields to the hub once ``BUDGET_S`` has passed since this greenlet last had
to, so the loop is never held for much longer than that while the work still takes the
same CPU. Outside a cooperative block (the final report, written when no stream is open;
unit tests; a hub callback) it does nothing, so that work stays atomic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import gevent
from gevent import getcurrent

# Half a millisecond: well under the shortest decode steps served today (~2 ms per token),
# and ~20 histogram units of work, so the yields themselves cost little (a few µs each).
BUDGET_S = 0.0005
TURN_S = 1e-5  # a timer as short as libev allows: the loop's minimum wait decides (≤ 1 ms)

_since: dict[int, float] = {}  # id(greenlet) → perf_counter of its last turn; absent: not cooperative


@contextmanager
def cooperative() -> Iterator[None]:
    """Let ``give_way()`` yield inside this block (a no-op in the hub itself, which must not
    switch out, and when nested: the outer block's clock goes on)."""
    current = getcurrent()
    key = id(current)
    if key in _since or current is gevent.get_hub():
        yield
        return
    _since[key] = time.perf_counter()
    try:
        yield
    finally:
        _since.pop(key, None)


def give_way() -> None:
    """Yield to the event loop if this greenlet has held it for ``BUDGET_S`` (inside a
    ``cooperative()`` block only)."""
    key = id(getcurrent())
    since = _since.get(key)
    if since is None:
        return
    if time.perf_counter() - since >= BUDGET_S:
        # Not sleep(0): the hub runs callbacks queued meanwhile (sleep(0)'s own among them)
        # for up to the switch interval (5 ms) before it polls sockets again, so the reads
        # would wait as long as without yielding; measured: the same 5 ms ITL error. A timer
        # makes the loop poll; it returns at the first I/O or within epoll's 1 ms.
        gevent.sleep(TURN_S)
        _since[key] = time.perf_counter()


def active() -> bool:
    """Whether this greenlet is in a cooperative block (what tests and callers may ask)."""
    return id(getcurrent()) in _since
