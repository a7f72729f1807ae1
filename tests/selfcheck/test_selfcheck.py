"""Self-check: the saturation verdict from injected clocks and CPU readings, and the probe."""

from __future__ import annotations

import pytest

from loadkit.selfcheck import SUSPECT, SaturationMonitor, SelfCheck, SelfCheckConfig, p99
from tests.helpers.selfcheck import MS, Clock, Counters, FakeStats, run


def drive(
    mon: SaturationMonitor, clock: Clock, seconds: int, lag_ms: float, cpu_frac: float, cpu: list[float]
) -> list[str]:
    """Simulate `seconds` of probes every 20 ms with a given lag and CPU use (no reads)."""
    c = Counters(cpu_s=cpu[0])
    out = run(mon, clock, seconds, c, lag_ms=lag_ms, cpu=cpu_frac)
    cpu[0] = c.cpu_s
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
    """Reads stamped in user space carry the loop's lag: over 5 ms, every figure is suspect."""
    clock, cpu = Clock(), [0.0]
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall, node="worker 3", kernel_stamps=False)
    drive(mon, clock, 10, lag_ms=1.0, cpu_frac=0.5, cpu=cpu)
    onset_wall = clock.wall()
    msgs = drive(mon, clock, 10, lag_ms=12.0, cpu_frac=0.5, cpu=cpu)
    assert len(msgs) == 1
    assert "worker 3" in msgs[0] and "ttft_ms" in msgs[0]
    assert ": event-loop lag p99 12 ms (limit 5 ms); its event loop was held" in msgs[0]
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
    assert summary is not None and "saturated in 5 of 5 windows" in summary
    assert "worst CPU 100% of a core (limit 90%); cause: busy" in summary and "Add workers" in summary
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
    check = SelfCheck(stats, cfg, node="local", spawn=gevent.spawn, sleep=gevent.sleep)

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


def test_start_needs_the_loops_spawn_and_sleep():
    """The probe brings no event loop of its own (no gevent in loadkit.selfcheck)."""
    with pytest.raises(RuntimeError, match="spawn and sleep"):
        SelfCheck(FakeStats(), node="local").start()


def test_health_field_reports_coalesced_reads(monkeypatch):
    from loadkit.client import stamps as httpstream
    from loadkit.selfcheck import read_stats

    monkeypatch.setattr(httpstream, "READS", httpstream.ReadCounters())
    assert read_stats() == {"reads": 0, "kernel_stamped_pct": None, "coalesced_read_pct": None}
    monkeypatch.setattr(
        httpstream, "READS", httpstream.ReadCounters(reads=400, kernel_stamped=400, coalesced=3)
    )
    assert read_stats() == {"reads": 400, "kernel_stamped_pct": 100.0, "coalesced_read_pct": 0.75}
    stats = FakeStats()
    check = SelfCheck(stats, node="local")
    check.stop()
    assert stats.manifest["client_selfcheck"]["coalesced_read_pct"] == 0.75


def drive_reads(mon: SaturationMonitor, clock: Clock, seconds: int, lag_ms: float, cpu_frac: float,
                reads_per_s: int, late_frac: float, state: Counters, coalesced_frac: float = 0.0,
                firsts_per_s: int = 0, first_coalesced_frac: float = 0.0, late_coalesced: float | None = None) -> list[str]:  # fmt: skip
    """Like ``drive``, with kernel-stamped reads of which ``late_frac`` waited over the limit
    and ``coalesced_frac`` held two events (``late_coalesced`` of those also waited: the
    client's coalescing). ``state``: the cumulative counters (``tests.helpers.selfcheck.run``)."""
    return run(mon, clock, seconds, state, lag_ms=lag_ms, cpu=cpu_frac, reads_per_s=reads_per_s, late=late_frac,
               coalesced=coalesced_frac, firsts_per_s=firsts_per_s, first_coalesced=first_coalesced_frac,
               late_coalesced=late_coalesced)  # fmt: skip


def test_kernel_stamped_client_with_a_lagging_loop_suspects_sends_not_timestamps():
    """Reads keep up (kernel stamps, < 1 % late) while greenlets lag: requests go out late,
    so the schedule and the offered load are suspect, and the token timestamps are not."""
    from loadkit.selfcheck import SEND_SUSPECT

    clock, state = Clock(), Counters()
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    msgs = drive_reads(
        mon, clock, 10, lag_ms=30, cpu_frac=0.8, reads_per_s=40_000, late_frac=0.001, state=state
    )
    assert len(msgs) == 1
    assert (
        "0.1% of reads waited over 1 ms in their socket" in msgs[0]
        and "TTFT, ITL, TPOT and E2E stand" in msgs[0]
    )
    field = mon.manifest_field()
    assert field is not None
    assert field["reasons"] == ["event_loop_lag"] and field["suspect"] == SEND_SUSPECT
    assert "ttft_ms" not in field["suspect"] and field["max_late_read_pct"] == pytest.approx(0.1)
    assert (
        msgs[0].startswith("client saturated on local from ") and ": event-loop lag p99 30 ms (limit 20 ms); "
    )
    assert "this process was busy: CPU 80% of a core" in msgs[0] and msgs[0].endswith("or lower the load.")


def test_kernel_stamped_client_tolerates_loop_lag_below_the_send_limit():
    """12 ms of loop lag with kernel stamps only delays sends a little: not saturated. The
    same lag with user-space stamps is in every timestamp: saturated, everything suspect."""
    clock, state = Clock(), Counters()
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    assert (
        drive_reads(mon, clock, 10, lag_ms=12, cpu_frac=0.5, reads_per_s=20_000, late_frac=0.0, state=state)
        == []
    )
    clock2, cpu = Clock(), [0.0]
    mon2 = SaturationMonitor(mono_ns=clock2.mono, wall_ns=clock2.wall, kernel_stamps=False)
    msgs = drive(mon2, clock2, 10, lag_ms=12, cpu_frac=0.5, cpu=cpu)
    assert len(msgs) == 1 and "(limit 5 ms)" in msgs[0]
    field = mon2.manifest_field()
    assert field is not None and field["suspect"] == SUSPECT


def test_reads_falling_behind_arrivals_make_timestamps_suspect_and_cpu_later_makes_all():
    from loadkit.selfcheck import TIMING_SUSPECT

    clock, state = Clock(), Counters()
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall, node="worker 1")
    assert (
        drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.5, reads_per_s=10_000, late_frac=0.0, state=state)
        == []
    )
    # Reads that wait (5 % over 1 ms) but still come before the next token cost nothing ...
    assert (
        drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.5, reads_per_s=10_000, late_frac=0.05, state=state)
        == []
    )
    # ... reads that wait past it (1 % hold two events) do.
    msgs = drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.5, reads_per_s=10_000, late_frac=0.05, state=state,
                       coalesced_frac=0.01, late_coalesced=1.0)  # fmt: skip
    assert len(msgs) == 1 and "ttft_ms" in msgs[0] and "stand" not in msgs[0]
    field = mon.manifest_field()
    assert field is not None and field["reasons"] == ["arrival_lag"] and field["suspect"] == TIMING_SUSPECT
    # Later the CPU runs out too: one more warning, and now every figure is suspect.
    msgs = drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.99, reads_per_s=10_000, late_frac=0.05, state=state,
                       coalesced_frac=0.01, late_coalesced=1.0)  # fmt: skip
    assert len(msgs) == 1 and msgs[0].startswith("client saturation on worker 1 worse")
    assert "CPU 99% of a core (limit 90%)" in msgs[0] and "this process was busy" in msgs[0]
    field = mon.manifest_field()
    assert field is not None and field["suspect"] == SUSPECT and field["reasons"] == ["arrival_lag", "cpu"]
    summary = mon.summary_message()
    assert summary is not None and "suspect: ttft_ms" in summary
    assert ("worst 2.2% of token events came in reads holding several that waited over 1 ms (limit 0.75%), CPU 99% of "
            "a core (limit 90%)") in summary  # fmt: skip
    assert "cause: busy, stall" in summary


def test_coalesced_reads_are_the_clients_only_when_they_waited():
    """The same coalescing (0.9 % of reads hold two events: 2 % of the token events) is the
    client's when those reads waited in their sockets — it left the first event unread — and
    the server's when they were read on time (its back-to-back writes: timestamps right)."""
    from loadkit.selfcheck import TIMING_SUSPECT

    clock, state = Clock(), Counters()
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    assert drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.5, reads_per_s=40_000, late_frac=0.03,
                       state=state, coalesced_frac=0.009, late_coalesced=0.0) == []  # fmt: skip
    assert mon.note is not None and "2.0% of token events came in reads holding several" in mon.note
    # Under the limit (0.4 % of token events) even when they waited: a p99 cannot move.
    assert drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.5, reads_per_s=40_000, late_frac=0.03,
                       state=state, coalesced_frac=0.009, late_coalesced=0.2) == []  # fmt: skip
    msgs = drive_reads(mon, clock, 8, lag_ms=1, cpu_frac=0.5, reads_per_s=40_000, late_frac=0.03,
                       state=state, coalesced_frac=0.009, late_coalesced=0.9)  # fmt: skip
    assert len(msgs) == 1
    # The window that trips still straddles the earlier seconds: 0.95 %, and 1.8 % at the worst;
    # 3 % of all reads waited, so 3 % of the 2 % coalesced would have by chance: 0.92 % is judged.
    assert (
        ": 0.92% of token events came in reads holding several that waited over 1 ms, beyond the 3.0% that "
        "any read did (limit 0.75%); " in msgs[0]
    )
    assert (
        "; its reads fell behind: 3.0% of reads waited over 1 ms in their socket (CPU 50% of a core"
        in msgs[0]
    )
    field = mon.manifest_field()
    assert field is not None and field["suspect"] == TIMING_SUSPECT
    assert field["max_late_coalesced_event_pct"] == pytest.approx(1.78, abs=0.02)


def test_first_tokens_in_coalesced_reads_make_timestamps_suspect():
    """One read in hundreds carries a first token: 2 % of first tokens coalesced moves the
    TTFT p99 while the read-level rate stays far below its limit."""
    from loadkit.selfcheck import TIMING_SUSPECT

    clock, state = Clock(), Counters()
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    msgs = drive_reads(mon, clock, 10, lag_ms=1, cpu_frac=0.6, reads_per_s=40_000, late_frac=0.001, state=state,
                       coalesced_frac=0.0002, firsts_per_s=150, first_coalesced_frac=0.02, late_coalesced=1.0)  # fmt: skip
    assert len(msgs) == 1
    assert (": 2.0% of first tokens came in reads holding several that waited over 1 ms (limit 0.75%); this process "
            "was busy") in msgs[0]  # fmt: skip
    field = mon.manifest_field()
    assert field is not None and field["suspect"] == TIMING_SUSPECT
    assert field["max_first_coalesced_pct"] == pytest.approx(2.0, abs=0.1)
    assert field["max_coalesced_read_pct"] < 0.5


def test_too_few_reads_are_not_judged():
    clock, state = Clock(), Counters()
    mon = SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall)
    # 10 reads a second, half of them late: 50 in a window is too few for a p99.
    assert (
        drive_reads(mon, clock, 10, lag_ms=1, cpu_frac=0.1, reads_per_s=10, late_frac=0.5, state=state) == []
    )
    assert mon.health_field()["max_late_read_pct"] is None


def test_recv_stamped_counts_reads_that_waited_in_the_socket(monkeypatch):
    """A real TCP socket with kernel stamps: data read 30 ms after it arrived is a late read
    under a 5 ms limit, and not under a 1 s one."""
    import socket
    import time

    from loadkit.client import stamps as httpstream

    counters = httpstream.ReadCounters()
    monkeypatch.setattr(httpstream, "READS", counters)
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    try:
        if not httpstream.enable_kernel_timestamps(client):
            pytest.skip("no SO_TIMESTAMPNS here")
        # The kernel turns packet stamping on a moment after the first socket asks for it
        # (deferred work): wait until a read carries a stamp.
        for _ in range(100):
            conn.sendall(b"w")
            time.sleep(0.01)
            httpstream.recv_stamped(client, True)
            if counters.kernel_stamped:
                break
        counters.kernel_stamped = counters.late = 0
        for limit_ms, late in ((5, 1), (1000, 1)):
            counters.late_ns = int(limit_ms * MS)
            conn.sendall(b"x")
            time.sleep(0.03)
            data, t_read = httpstream.recv_stamped(client, True)
            assert data == b"x" and time.perf_counter_ns() - t_read >= 25 * MS  # the kernel's stamp
            assert counters.late == late
        assert counters.kernel_stamped == 2
    finally:
        for s in (client, conn, server):
            s.close()
