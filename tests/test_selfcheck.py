"""Self-check: the saturation verdict from injected clocks and CPU readings, and the probe."""

from __future__ import annotations

import pytest

from loadkit.selfcheck import SUSPECT, SaturationMonitor, SelfCheck, SelfCheckConfig, install, p99

MS = 1_000_000
WALL0 = 1_800_000_000 * 10**9


class Clock:
    def __init__(self) -> None:
        self.t = 10**12

    def mono(self) -> int:
        return self.t

    def wall(self) -> int:
        return WALL0 + self.t - 10**12


class FakeStats:
    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.manifest: dict = {}

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def set_manifest_fields(self, fields: dict) -> None:
        self.manifest.update(fields)


def drive(mon: SaturationMonitor, clock: Clock, seconds: int, lag_ms: float, cpu_frac: float,
          cpu: list[float]) -> list[str]:
    """Simulate `seconds` of probes every 20 ms with a given lag and CPU use."""
    out = []
    for _ in range(seconds):
        for _ in range(50):
            clock.t += 20 * MS
            mon.add_lag(int(lag_ms * MS))
        cpu[0] += cpu_frac
        msg = mon.evaluate(cpu[0])
        if msg:
            out.append(msg)
    return out


def test_p99_nearest_rank():
    assert p99([5]) == 5
    assert p99(list(range(1, 101))) == 99
    assert p99(list(range(1, 1001))) == 990


def test_healthy_client_is_never_saturated_and_health_is_measured():
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    assert drive(mon, clock, 20, lag_ms=0.5, cpu_frac=0.4, cpu=cpu) == []
    assert not mon.saturated and mon.manifest_field() is None
    health = mon.health_field()
    assert health["windows"] >= 14
    assert health["max_lag_ms"] == pytest.approx(0.5)
    assert health["max_cpu"] == pytest.approx(40.0, abs=0.5)


def test_no_verdict_before_a_full_window():
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    assert drive(mon, clock, 3, lag_ms=50, cpu_frac=1.0, cpu=cpu) == []
    assert mon.health_field()["max_lag_ms"] is None  # not measured yet: None, not 0


def test_lag_over_threshold_warns_once_with_onset_time_and_suspects():
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall, node="worker 3")
    drive(mon, clock, 10, lag_ms=1.0, cpu_frac=0.5, cpu=cpu)
    onset_wall = clock.wall()
    msgs = drive(mon, clock, 10, lag_ms=12.0, cpu_frac=0.5, cpu=cpu)
    assert len(msgs) == 1
    assert "worker 3" in msgs[0] and "ttft_ms" in msgs[0] and "12.0 ms" in msgs[0]
    field = mon.manifest_field()
    assert field is not None
    assert field["reasons"] == ["event_loop_lag"]
    assert field["max_lag_ms"] == pytest.approx(12.0)
    assert field["suspect"] == SUSPECT
    # The first over-threshold window closes 1 s after the change; the onset is its start.
    assert abs(field["from_unix"] - onset_wall / 1e9) <= SelfCheckConfig().window_s


def test_a_single_lag_spike_below_the_p99_does_not_trigger():
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    drive(mon, clock, 6, lag_ms=0.2, cpu_frac=0.3, cpu=cpu)
    clock.t += 20 * MS
    mon.add_lag(80 * MS)  # one GC pause among 250 samples in the window
    assert mon.evaluate(cpu[0] + 0.01) is None
    assert not mon.saturated


def test_cpu_over_threshold_triggers_even_with_low_lag():
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    msgs = drive(mon, clock, 10, lag_ms=0.5, cpu_frac=0.97, cpu=cpu)
    assert len(msgs) == 1
    field = mon.manifest_field()
    assert field is not None and field["reasons"] == ["cpu"] and field["max_cpu"] == pytest.approx(97, abs=1)


def test_summary_and_reset():
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    assert mon.summary_message() is None
    drive(mon, clock, 10, lag_ms=20, cpu_frac=1.0, cpu=cpu)
    summary = mon.summary_message()
    assert summary is not None and "max event-loop lag p99 20.0 ms" in summary
    mon.reset()
    assert not mon.saturated and mon.windows == 0


def test_config_rejects_non_positive():
    with pytest.raises(ValueError, match="lag_ms"):
        SelfCheckConfig(lag_ms=0)


def test_probe_greenlet_reports_a_blocked_loop():
    """Real gevent: a greenlet that hogs the loop for 60 ms per 100 ms must be caught."""
    import gevent

    stats = FakeStats()
    cfg = SelfCheckConfig(lag_ms=5, cpu_pct=1000, window_s=0.5, probe_s=0.005, eval_s=0.1)
    check = SelfCheck(stats, cfg, node="local")

    def hog() -> None:
        import time

        while True:
            end = time.perf_counter() + 0.06
            while time.perf_counter() < end:
                pass
            gevent.sleep(0.04)

    check.start()
    assert stats.manifest["client_saturation"] is None
    h = gevent.spawn(hog)
    gevent.sleep(1.2)
    h.kill()
    check.stop()
    assert any(w.startswith("client saturated on local") for w in stats.warnings)
    assert any(w.startswith("client saturation summary") for w in stats.warnings)
    assert stats.manifest["client_saturation"]["max_lag_ms"] > 20


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
            self.loadkit = type("R", (), {"stats": FakeStats()})()

    master = Env(MasterRunner())
    install(master)
    master.events.test_start.fire()
    master.events.test_stop.fire()
    assert master.loadkit.stats.manifest == {}

    class LocalRunner:
        pass

    local = Env(LocalRunner())
    install(local)
    local.events.test_start.fire()
    assert local.loadkit.stats.manifest["client_saturation"] is None
    local.events.test_stop.fire()
    assert local.loadkit.stats.manifest["client_selfcheck"]["node"] == "local"


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
    env.loadkit = type("R", (), {"stats": None})()
    install(env)
    env.events.test_start.fns[0]()
    env.events.test_stop.fns[0]()  # no collector: nothing to raise on
    LogOnlyStats().warn("client saturated (test)")
    assert "client saturated (test)" in caplog.text


def test_health_field_reports_coalesced_reads(monkeypatch):
    from loadkit import httpstream
    from loadkit.selfcheck import read_stats

    monkeypatch.setattr(httpstream, "READS", httpstream.ReadCounters())
    assert read_stats() == {"reads": 0, "kernel_stamped_pct": None, "coalesced_read_pct": None}
    monkeypatch.setattr(httpstream, "READS", httpstream.ReadCounters(reads=400, kernel_stamped=400, coalesced=3))
    assert read_stats() == {"reads": 400, "kernel_stamped_pct": 100.0, "coalesced_read_pct": 0.75}
    stats = FakeStats()
    check = SelfCheck(stats, node="local")
    check.stop()
    assert stats.manifest["client_selfcheck"]["coalesced_read_pct"] == 0.75
