"""The self-check in a Locust run (loadkit/locust/selfcheck.py): started on the nodes that send
traffic, reporting into the stats collector it is handed."""

from __future__ import annotations

from loadkit.locust.selfcheck import install, node_name
from tests.helpers.selfcheck import FakeStats


def test_install_starts_on_workers_and_local_only():
    class Events:
        def __init__(self) -> None:
            self.test_start, self.test_stop = Hook(), Hook()

    class Hook:
        def __init__(self) -> None:
            self.fns: list = []

        def add_listener(self, fn) -> None:
            self.fns.append(fn)

        def fire(self) -> None:
            for fn in self.fns:
                fn()

    class MasterRunner:
        pass

    class Env:
        def __init__(self, runner) -> None:
            self.events, self.runner = Events(), runner
            self.stats = FakeStats()

    master = Env(MasterRunner())
    install(master, master.stats)
    master.events.test_start.fire()
    master.events.test_stop.fire()
    assert master.stats.manifest == {}

    class LocalRunner:
        pass

    local = Env(LocalRunner())
    install(local, local.stats)
    local.events.test_start.fire()
    assert local.stats.manifest["client_saturation"] is None
    local.events.test_stop.fire()
    assert local.stats.manifest["client_selfcheck"]["node"] == "local"


def test_install_without_a_stats_collector_logs_instead(caplog):
    from loadkit.selfcheck import LogOnlyStats

    class Hook:
        def __init__(self) -> None:
            self.fns: list = []

        def add_listener(self, fn) -> None:
            self.fns.append(fn)

    class LocalRunner:
        pass

    env = type("Env", (), {})()
    env.events = type("Events", (), {"test_start": Hook(), "test_stop": Hook()})()
    env.runner = LocalRunner()
    install(env, None)
    env.events.test_start.fns[0]()
    env.events.test_stop.fns[0]()  # no collector: nothing to raise on
    LogOnlyStats().warn("client saturated (test)")
    assert "client saturated (test)" in caplog.text


def test_node_name_names_a_worker_by_its_index():
    class WorkerRunner:
        worker_index = 3

    class LocalRunner:
        pass

    assert node_name(type("E", (), {"runner": WorkerRunner()})()) == "worker 3"
    assert node_name(type("E", (), {"runner": LocalRunner()})()) == "local"
    assert node_name(object()) == "local"
