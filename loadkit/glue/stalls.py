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


def warm_inspect() -> float:
    """Fill ``inspect``'s caches the way Locust's ``Runner.stop`` will use them; returns ms."""
    t0 = time.perf_counter()
    inspect.getframeinfo(inspect.stack()[0][0])
    return (time.perf_counter() - t0) * 1e3


def install(environment: Any) -> None:
    """At test start (no stream open yet): warm ``inspect``, collect and freeze; when
    spawning completes (streams running): freeze again without collecting; from test_stopping
    to test_stop: no automatic collection. On every node, the master included: its stalls
    delay the workers' reports, not their reads."""

    def on_test_start(**_kw: Any) -> None:
        warm_inspect()
        freeze_heap(collect=True)

    def on_spawning_complete(**_kw: Any) -> None:
        freeze_heap(collect=False)

    def on_test_stopping(**_kw: Any) -> None:
        if enabled():
            gc.disable()

    def on_test_stop(**_kw: Any) -> None:
        gc.enable()

    environment.events.test_start.add_listener(on_test_start)
    environment.events.spawning_complete.add_listener(on_spawning_complete)
    environment.events.test_stopping.add_listener(on_test_stopping)
    environment.events.test_stop.add_listener(on_test_stop)
    environment.events.quitting.add_listener(on_test_stop)  # never leave a process without GC
