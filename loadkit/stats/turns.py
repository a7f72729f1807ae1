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
``give_way()`` yields to the loop once ``BUDGET_S`` has passed since this task last had
to, so the loop is never held for much longer than that while the work still takes the
same CPU. Outside a cooperative block (the final report, written when no stream is open;
unit tests; a loop callback) it does nothing, so that work stays atomic.

The stats know no event loop: whoever runs one installs it with ``set_yield`` (the Locust
glue installs gevent's hub at init, ``loadkit/locust/cooperative.py``). Until then there is
nothing to yield to, every block is atomic and ``give_way()`` returns at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# Half a millisecond: well under the shortest decode steps served today (~2 ms per token),
# and ~20 histogram units of work, so the yields themselves cost little (a few µs each).
BUDGET_S = 0.0005
TURN_S = 1e-5  # the shortest turn asked of the loop: its minimum wait decides (≤ 1 ms)


@dataclass(frozen=True, slots=True)
class Yield:
    """How to give an event loop its turn: what the stats need of it, and nothing else."""

    task: Callable[[], object]  # the running task (a greenlet): each keeps its own clock
    can_switch: Callable[[], bool]  # False in the loop itself, whose callbacks must not switch out
    turn: Callable[[float], None]  # let the loop run (poll its sockets) for up to that many s


def _no_task() -> object:
    return None


def _never() -> bool:
    return False


def _no_turn(_seconds: float) -> None:
    return None


NO_YIELD = Yield(task=_no_task, can_switch=_never, turn=_no_turn)  # no loop: all work atomic

_loop: Yield = NO_YIELD
_since: dict[int, float] = {}  # id(task) → perf_counter of its last turn; absent: not cooperative


def set_yield(loop: Yield | None) -> Yield:
    """Install how this process's event loop is given turns (None: no loop, the default).
    Returns the one it replaces, so that a test can put it back."""
    global _loop
    previous, _loop = _loop, loop or NO_YIELD
    return previous


@contextmanager
def cooperative() -> Iterator[None]:
    """Let ``give_way()`` yield inside this block (a no-op in the loop itself, which must not
    switch out, without a loop, and when nested: the outer block's clock goes on)."""
    loop = _loop
    key = id(loop.task())
    if key in _since or not loop.can_switch():
        yield
        return
    _since[key] = time.perf_counter()
    try:
        yield
    finally:
        _since.pop(key, None)


def give_way() -> None:
    """Yield to the event loop if this task has held it for ``BUDGET_S`` (inside a
    ``cooperative()`` block only)."""
    if not _since:  # no block open anywhere: the common case, and the only one without a loop
        return
    key = id(_loop.task())
    since = _since.get(key)
    if since is None:
        return
    if time.perf_counter() - since >= BUDGET_S:
        _loop.turn(TURN_S)
        _since[key] = time.perf_counter()


def active() -> bool:
    """Whether this task is in a cooperative block (what tests and callers may ask)."""
    return bool(_since) and id(_loop.task()) in _since
