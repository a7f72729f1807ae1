"""Stall guards for Locust processes: the heap frozen before load, inspect's caches warm."""

from __future__ import annotations

import gc
import inspect
import sys

import pytest

from loadkit.locust import stalls


@pytest.fixture()
def unfrozen():
    yield
    gc.unfreeze()  # the rest of the suite runs with a normal heap


class Hook:
    """One Locust event of a fake environment: keeps its listeners."""

    def __init__(self) -> None:
        self.fns: list = []

    def add_listener(self, fn) -> None:
        self.fns.append(fn)


def fake_env():
    """An environment with the events ``stalls.install`` listens to."""
    env = type("Env", (), {})()
    env.events = type("Events", (), {name: Hook() for name in ("test_start", "spawning_complete", "test_stopping",
                                                               "test_stop", "quitting")})()  # fmt: skip
    return env


def test_freeze_heap_moves_live_objects_out_of_collections(unfrozen, monkeypatch):
    monkeypatch.delenv("LOADKIT_GC_FREEZE", raising=False)
    gc.unfreeze()
    import weakref

    class Thing:
        pass

    marker = [Thing() for _ in range(1000)]
    ref = weakref.ref(marker[0])
    done = stalls.freeze_heap(collect=True)
    assert done is not None and done["frozen_objects"] == gc.get_freeze_count() > 1000
    # A frozen object is in no generation a collection walks.
    assert not any(o is marker for o in gc.get_objects())
    # Reference counting still frees it.
    del marker
    assert ref() is None


def test_freeze_heap_can_be_turned_off(unfrozen, monkeypatch):
    gc.unfreeze()
    monkeypatch.setenv("LOADKIT_GC_FREEZE", "0")
    assert stalls.freeze_heap(collect=False) is None
    assert gc.get_freeze_count() == 0


def test_warm_inspect_does_the_module_walk_locust_stop_would_do():
    """Locust's Runner.stop calls inspect.stack(); its first call walks every loaded module
    to map files to modules. After warm_inspect every module loaded now is mapped."""
    stalls.warm_inspect()
    mapped = set(inspect._filesbymodname)  # type: ignore[attr-defined]  # the cache that walk fills
    loaded_with_files = {name for name, mod in list(sys.modules.items()) if getattr(mod, "__file__", None)}
    assert loaded_with_files <= mapped


def test_install_registers_at_test_start_and_spawning_complete(unfrozen, monkeypatch):
    monkeypatch.delenv("LOADKIT_GC_FREEZE", raising=False)
    gc.unfreeze()

    env = fake_env()
    stalls.install(env)
    env.events.test_start.fns[0]()
    first = gc.get_freeze_count()
    assert first > 0
    users = [[object()] for _ in range(500)]  # what spawning creates
    env.events.spawning_complete.fns[0](user_count=500)
    assert gc.get_freeze_count() >= first + 500
    del users
    # While users stop (test_stopping .. test_stop) nothing collects automatically.
    env.events.test_stopping.fns[0]()
    assert not gc.isenabled()
    env.events.test_stop.fns[0]()
    assert gc.isenabled()
    env.events.test_stopping.fns[0]()
    env.events.quitting.fns[0]()  # Ctrl-C during the stop: collection comes back too
    assert gc.isenabled()


def test_heap_freezer_keeps_the_streams_state_out_of_collections_until_stop(unfrozen, monkeypatch):
    """While streams run, what they allocate is frozen within a tick, so collections stop
    walking it; after stop() no more ticks come."""
    import gevent

    monkeypatch.delenv("LOADKIT_GC_FREEZE", raising=False)
    gc.unfreeze()
    freezer = stalls.HeapFreezer(interval_s=0.02)
    freezer.start()
    state = [[i] for i in range(1000)]  # a request's state, allocated while streams run
    gevent.sleep(0.1)
    assert freezer.freezes >= 2
    assert not any(o is state for o in gc.get_objects())  # frozen: no generation holds it
    freezer.stop()
    frozen_before = freezer.freezes
    gevent.sleep(0.05)
    assert freezer.freezes == frozen_before  # the greenlet is gone


def test_heap_freezer_is_off_with_the_freezing(unfrozen, monkeypatch):
    import gevent

    monkeypatch.setenv("LOADKIT_GC_FREEZE", "0")
    gc.unfreeze()
    freezer = stalls.HeapFreezer(interval_s=0.01)
    freezer.start()
    gevent.sleep(0.05)
    assert freezer.freezes == 0 and gc.get_freeze_count() == 0
    freezer.stop()


def test_install_freezes_while_users_run_and_a_next_test_unfreezes_first(unfrozen, monkeypatch):
    """spawning_complete starts the ticks, test_stop ends them; the next test_start gives the
    last test's frozen objects back to the collector before collecting and freezing."""
    import gevent

    monkeypatch.delenv("LOADKIT_GC_FREEZE", raising=False)
    monkeypatch.setattr(stalls, "FREEZE_EVERY_S", 0.02)
    gc.unfreeze()

    env = fake_env()
    stalls.install(env)
    env.events.test_start.fns[0]()
    env.events.spawning_complete.fns[0](user_count=1)
    cycle: list = []
    cycle.append(cycle)  # a request's state that becomes cyclic garbage after a freeze
    gevent.sleep(0.1)
    assert not any(o is cycle for o in gc.get_objects())
    env.events.test_stop.fns[0]()
    import weakref

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    ref = weakref.ref(node)
    env.events.spawning_complete.fns[0](user_count=1)  # ticks again (same test)
    gevent.sleep(0.1)
    env.events.test_stop.fns[0]()
    del node
    gc.collect()
    assert ref() is not None  # frozen while alive: kept until the next test starts
    env.events.test_start.fns[0]()
    assert ref() is None


def test_no_freeze_happens_after_stop_even_when_the_tick_was_already_due(unfrozen, monkeypatch):
    """stop() kills without blocking; a tick whose wake-up was already queued must not freeze
    once more after stop() returned (it did, once, in CI)."""
    import gevent

    monkeypatch.delenv("LOADKIT_GC_FREEZE", raising=False)
    freezer = stalls.HeapFreezer(interval_s=0)  # every wake-up is queued the moment it sleeps
    freezer.start()
    gevent.sleep(0.01)
    freezer.stop()
    frozen_at_stop = freezer.freezes
    gevent.sleep(0.01)
    assert frozen_at_stop >= 1 and freezer.freezes == frozen_at_stop
