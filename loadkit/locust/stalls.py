"""Keep known stalls off the event loop of a Locust process while streams are open.

Any stretch in which the hub does not run leaves sockets unread; a socket left unread past
the next token holds two events, and a read knows only its newest byte's arrival, so the
earlier event is stamped late by up to the stall. Two such stalls were measured at 300
streams × 10 ms/token, both putting ~1 % of first tokens 34–73 ms late at test stop (while
``--stop-timeout`` lets the last requests finish):

**Locust's stop** calls ``inspect.stack()`` to log its caller. The first call in a process
fills ``inspect``'s module-file cache by walking every module (37 ms with ~850 modules;
0.15 ms afterwards), with the loop stopped. ``warm_inspect()`` makes that first call at test
start, before any stream is open.

**Full garbage collections.** A full (generation 2) collection walks every tracked object, with the event loop stopped: in
a Locust process that is Locust, loadkit, their imports and every user, ~80,000 objects, and
it took 28–30 ms (measured with ``gc.callbacks`` at 300 streams); one fell at test stop. So
before the load starts, ``freeze_heap()`` collects once (no stream is open yet) and moves
every object alive then into the permanent generation (``gc.freeze()``), which collections
skip; after the users are spawned it freezes again without collecting. Later collections
then walk only what the run itself keeps. Objects alive at a freeze are still freed by
reference counting; only cyclic garbage alive at that moment would stay, and there is none
worth counting after the collection. ``LOADKIT_GC_FREEZE=0`` turns it off (to measure it).

**Collections at stop.** Locust's stop spawns a greenlet per user, and those allocations set
off a full collection right then (9–11 ms even with the heap frozen, at 500 users) while the
last requests stream. Automatic collection is therefore paused from ``test_stopping`` until
``test_stop`` (users done) — a few seconds at most, bounded by ``--stop-timeout``.

**Collections of the streams' own state.** Even with the start-up heap frozen, what the run
allocates is walked again and again: every open request's record, its per-event lists and its
decoder live for the whole request (2.5 s at 256 tokens × 10 ms) and climb the generations, and
at 500 streams × 10 ms/token a generation-1 or full collection walking them took 10–26 ms with
the loop stopped (gc.callbacks; 1–3 per 8 s run). Each such pause coalesced one or two events of
every stream and alone put ITL error p99 at one decode step (10 ms); with automatic collection
off for the stream phase, 4 runs of 4 had no coalesced window. Collections found no cyclic
garbage from the request path then (gc.DEBUG_SAVEALL: 34 objects in a run of 1,900 requests,
none of them loadkit's). So while streams run, ``HeapFreezer`` freezes the heap again every
``FREEZE_EVERY_S`` (``gc.freeze`` splices lists: O(1)): collections walk only what was
allocated since the last tick, and garbage cycles that die young are still collected. A 1 s
tick was not enough: after 500 streams restart together their new records are all young and
grow by an event per stream per step, and generation-0 collections still took 10–13 ms; with
0.1 s ticks no collection took over 3 ms and 3 runs of 3 had no coalesced window. The heap stays
frozen after ``test_stop`` (as the start-up freeze always did): unfreezing there made the report
writing walk the whole heap, +5 µs per event at 100 streams in a Locust worker. Cycles among
objects frozen while alive are freed when a next test in the same process starts (unfreeze,
collect, freeze, with no stream open), or never in a one-test process, which then exits.

**loadkit's own live reports** (console table, web UI, a worker's flush, the batch flush of
finished requests) are not prevented here but split: they give way to the loop every 0.5 ms
(``loadkit/stats/turns.py``).
"""

from __future__ import annotations

import gc
import inspect
import os
import time
from typing import Any


def enabled() -> bool:
    return os.environ.get("LOADKIT_GC_FREEZE", "1") != "0"


def freeze_heap(collect: bool) -> dict[str, Any] | None:
    """Freeze what is alive now (after a full collection if ``collect``); returns the frozen
    object count and the pause, or None when turned off."""
    if not enabled():
        return None
    t0 = time.perf_counter()
    if collect:
        gc.collect()
    gc.freeze()
    return {"frozen_objects": gc.get_freeze_count(), "pause_ms": round((time.perf_counter() - t0) * 1e3, 1)}


FREEZE_EVERY_S = 0.1  # bounds the young heap to 0.1 s of allocations (see above)


class HeapFreezer:
    """A greenlet that freezes the heap every ``interval_s`` while streams run (see above)."""

    def __init__(self, interval_s: float | None = None) -> None:
        self.interval_s = FREEZE_EVERY_S if interval_s is None else interval_s
        self.freezes = 0
        self._greenlet: Any = None

    def start(self) -> None:
        if enabled() and self._greenlet is None:
            import gevent

            self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        import gevent

        me = gevent.getcurrent()
        while True:
            gevent.sleep(self.interval_s)
            if self._greenlet is not me:  # stopped: kill(block=False) may land after this wake-up
                return
            gc.freeze()  # O(1): the generations' lists are spliced onto the permanent one
            self.freezes += 1

    def stop(self) -> None:
        """Stop freezing (what is frozen stays frozen; see the module notes); no freeze
        happens after this returns."""
        if self._greenlet is not None:
            greenlet, self._greenlet = self._greenlet, None
            greenlet.kill(block=False)


def warm_inspect() -> float:
    """Fill ``inspect``'s caches the way Locust's ``Runner.stop`` will use them; returns ms."""
    t0 = time.perf_counter()
    inspect.getframeinfo(inspect.stack()[0][0])
    return (time.perf_counter() - t0) * 1e3


def install(environment: Any) -> None:
    """At test start (no stream open yet): warm ``inspect``, collect and freeze; when
    spawning completes (streams running): freeze again without collecting, then every
    FREEZE_EVERY_S until test_stop; from test_stopping to test_stop: no automatic collection.
    On every node, the master included: its stalls delay the workers' reports, not their reads."""

    freezer = HeapFreezer()

    def on_test_start(**_kw: Any) -> None:
        warm_inspect()
        if freezer.freezes:  # a previous test's state: its frozen cycles are freed now
            gc.unfreeze()
        freeze_heap(collect=True)

    def on_spawning_complete(**_kw: Any) -> None:
        freeze_heap(collect=False)
        freezer.start()

    def on_test_stopping(**_kw: Any) -> None:
        if enabled():
            gc.disable()

    def on_test_stop(**_kw: Any) -> None:
        freezer.stop()
        gc.enable()

    environment.events.test_start.add_listener(on_test_start)
    environment.events.spawning_complete.add_listener(on_spawning_complete)
    environment.events.test_stopping.add_listener(on_test_stopping)
    environment.events.test_stop.add_listener(on_test_stop)
    environment.events.quitting.add_listener(on_test_stop)  # never leave a process without GC
