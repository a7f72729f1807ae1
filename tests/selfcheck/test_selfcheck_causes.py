"""Self-check causes and words: the runs that used to cry wolf stay quiet, a starved, busy
or stalled client is told apart, and every message leads with the tripped measure.

The counters fed to the monitor are those real runs produced (window traces written with
LOADKIT_SELFCHECK_TRACE, docs/self-check.md): the README demo (96 users on two simulators,
~1,300 reads/s at 4-9 % of a core), web-UI runs of 2-4 users, one idle request, and the
demo's workload next to a CPU hog pinned to the client's core.
"""

from __future__ import annotations

import logging
import re

import pytest

from loadkit.selfcheck import SUSPECT, TIMING_SUSPECT, SelfCheck, SelfCheckConfig, sources
from loadkit.selfcheck.messages import num
from tests.helpers.selfcheck import Clock, Counters, FakeStats, monitor, run


def assert_quiet(mon, msgs: list[str]) -> None:
    assert msgs == [] and not mon.saturated and mon.manifest_field() is None and mon.summary_message() is None


def test_demo_with_the_server_writing_events_together_does_not_warn():
    """The issue's demo: saturated in 1 of 19 windows at 8 % CPU, tripped by reads holding
    several events. The client was on time (probe lag ~1.5 ms, no run-queue wait, no read
    waiting in its socket); the simulator, itself starved, wrote steps back to back. The
    truth log agreed: TTFT / ITL error p99 0.05 / 0.02 ms, every coalesced read's events
    written within 1 ms of each other."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(
        mon, clock, 9, c, lag_ms=1.5, spike_ms=4.4, cpu=0.05, reads_per_s=1300, wait=0.002, pressure=0.2
    )
    msgs += run(mon, clock, 5, c, lag_ms=1.6, spike_ms=6.5, cpu=0.085, reads_per_s=1400, coalesced=0.011,
                late=0.0007, wait=0.004, pressure=0.25)  # fmt: skip
    msgs += run(mon, clock, 6, c, lag_ms=1.5, cpu=0.05, reads_per_s=1300, wait=0.002, pressure=0.2)
    assert_quiet(mon, msgs)
    health = mon.health_field()
    assert health["server_coalesced"]["windows"] >= 1 and health["max_coalesced_event_pct"] > 1.0
    assert mon.note is not None and mon.note.startswith("server output seen on local from ")
    assert re.search(r"UTC: [0-9.]+% of token events came in reads holding several token events, written "
                     r"together by the server", mon.note)  # fmt: skip
    assert "while this process was on time (CPU " in mon.note
    assert mon.note.endswith("Nothing to do on the client: the server batches its writes.")


@pytest.mark.parametrize("users,cpu", [(2, 0.03), (3, 0.06), (4, 0.10)])
def test_small_web_ui_runs_do_not_warn(users, cpu):
    """2-4 users at 3-10 % of a core warned on nearly every run: ~60 reads/s a user, of
    which a few held two events the simulator wrote together (1 % of a small window)."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 30, c, lag_ms=2.0, spike_ms=5.0, cpu=cpu, reads_per_s=60 * users, coalesced=0.012,
               wait=0.01, pressure=0.3)  # fmt: skip
    assert_quiet(mon, msgs)


def test_a_single_idle_request_keeps_the_kernel_lag_limit():
    """One request, 1 % CPU, lag p99 6.3 ms: it warned with "(limit 5)" because a window
    without reads was taken for user-space stamping. The limit is the process's: 20 ms."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 8, c, lag_ms=6.3, cpu=0.01, reads_per_s=30)  # a few reads, stamped by the kernel
    msgs += run(mon, clock, 12, c, lag_ms=6.3, cpu=0.01)  # waiting for its first token: no reads at all
    assert_quiet(mon, msgs)
    assert mon.health_field()["lag_limit_ms"] == 20.0 and mon.health_field()["kernel_stamps"] is True


def test_one_lag_limit_in_every_message_of_a_run():
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 8, c, lag_ms=25, cpu=0.05, reads_per_s=500)
    # Out of CPU, and now its reads fall behind: worse (the CPU alone, with kernel stamps,
    # adds nothing to the late sends already suspect).
    msgs += run(mon, clock, 8, c, lag_ms=30, cpu=0.95, reads_per_s=500, coalesced=0.03, late_coalesced=1.0)
    summary = mon.summary_message()
    assert len(msgs) == 2 and summary is not None
    for text in (*msgs, summary):
        assert re.findall(r"event-loop lag p99 \d+ ms \(limit (\d+) ms\)", text) == ["20"], text
    assert "TTFT, ITL, TPOT and E2E stand" in msgs[0]  # kernel stamps: sends late, timestamps fine


def test_reads_stamped_in_user_space_judge_the_lag_at_5_ms():
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=6.3, cpu=0.05, reads_per_s=500, kernel=0.0)
    assert len(msgs) == 1 and "event-loop lag p99 6.3 ms (limit 5 ms)" in msgs[0]
    assert mon.health_field()["kernel_stamps"] is False and mon.health_field()["lag_limit_ms"] == 5.0


def test_a_client_starved_by_a_cpu_hog_says_free_the_machine():
    """The demo's workload with a busy loop on the client's core: 4 % CPU, run-queue wait
    17 %, 6 % of reads coalesced, nearly all of them after waiting in their sockets; truth:
    TTFT error p99 8.4 ms. Suspect, cause: starved."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=8.9, spike_ms=11.2, cpu=0.041, reads_per_s=1000, coalesced=0.06,
               late=0.10, wait=0.17, pressure=0.69, late_coalesced=0.9)  # fmt: skip
    assert len(msgs) == 1
    text = msgs[0]
    assert text.startswith("client saturated on local from ")
    assert (": 11% of token events came in reads holding several that waited over 1 ms (limit 0.75%); other "
            "processes held the CPU: ") in text  # fmt: skip
    assert (
        "this one waited for it 17% of the time while using 4.1% of a core; CPU pressure on the machine 69%"
        in text
    )
    assert text.endswith("Free the machine: other processes took the CPU this one needed (stop them, or give "
                         "loadkit a core of its own, e.g. taskset).")  # fmt: skip
    field = mon.manifest_field()
    assert field["causes"] == ["starved"] and field["suspect"] == TIMING_SUSPECT
    assert field["max_run_queue_wait_pct"] == pytest.approx(17, abs=0.5)


def test_an_idle_process_waiting_as_long_as_it_runs_is_starved():
    """At 3 % CPU a run-queue wait of 4.9 % is starvation (every wake-up waits for another
    process's slice); light accurate runs on a loaded machine waited 1-3.6 % at 5 %."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=3.4, cpu=0.033, reads_per_s=1000, coalesced=0.006, late=0.02, wait=0.049,
               late_coalesced=0.9)  # fmt: skip
    assert len(msgs) == 1 and "other processes held the CPU" in msgs[0]
    clock2, c2 = Clock(), Counters()
    mon2 = monitor(clock2)
    msgs = run(mon2, clock2, 10, c2, lag_ms=2.0, spike_ms=5.5, cpu=0.055, reads_per_s=1200, coalesced=0.004,
               late=0.001, wait=0.035)  # fmt: skip
    assert_quiet(mon2, msgs)


def test_a_process_that_waited_for_the_cpu_but_read_on_time_does_not_warn():
    """Waiting for a CPU (4.2 % at 3.5 % CPU, as 10 streams did on the loaded machine) is
    harmless while no read's data waits over 1 ms in its socket: the reads holding two
    events (0.83 %) are then the server's."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=3.0, spike_ms=4.1, cpu=0.035, reads_per_s=1000, coalesced=0.0083,
               wait=0.042, pressure=0.4)  # fmt: skip
    assert_quiet(mon, msgs)
    assert mon.note is not None and "waited for a CPU 4.2% of the time" in mon.note


def test_a_client_on_time_whose_reads_wait_now_and_then_does_not_warn():
    """The 4-user integration run under SCHED_FIFO on the loaded machine: probe lag never over
    1.1 ms, no run-queue wait, 6 % CPU, yet 0.6-1.4 % of reads waited over 1 ms (its own
    periodic work); 0.31-0.34 % of reads coalesced, the simulator's. Truth: TTFT / ITL error
    p99 0.030-0.043 / 0.045-0.087 ms. Warned ("reads fell behind") before the 2 % floor."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 12, c, lag_ms=1.05, spike_ms=1.1, cpu=0.06, reads_per_s=750, coalesced=0.0034,
               late=0.014, wait=0.0001, pressure=0.5)  # fmt: skip
    assert_quiet(mon, msgs)
    # 0.34 % of reads is 0.75 % of the token events, over the limit: read on time, so the
    # server's (noted, not warned); the few that waited are the late reads' share of them.
    assert mon.note is not None and mon.health_field()["max_coalesced_event_pct"] == pytest.approx(
        0.75, abs=0.02
    )
    assert mon.health_field()["max_late_coalesced_event_pct"] < 0.05


def test_a_busy_client_says_add_workers():
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=12, spike_ms=30, cpu=0.95, reads_per_s=45_000, coalesced=0.006,
               late=0.05, wait=0.02, late_coalesced=0.9)  # fmt: skip
    assert len(msgs) == 1
    assert (": 1.2% of token events came in reads holding several that waited over 1 ms (limit 0.75%), CPU 95% of a "
            "core (limit 90%); ") in msgs[0]  # fmt: skip
    assert "this process was busy, 5.0% of reads waited over 1 ms in their socket" in msgs[0]
    assert msgs[0].endswith("Add workers (--processes N, or --worker machines) or lower the load.")
    assert mon.manifest_field()["causes"] == ["busy"]


def test_a_stalled_event_loop_says_look_for_blocking_work():
    """20 % CPU, no wait, but the loop is held for 45 ms once a second (a blocking call in a
    hook): reads pile up behind it, coalesce, and wait in their sockets."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=0.5, spike_ms=45, spike_every=1, cpu=0.2, reads_per_s=8000,
               coalesced=0.01, late=0.03, wait=0.0, late_coalesced=0.9)  # fmt: skip
    assert len(msgs) == 1
    assert (": 2.0% of token events came in reads holding several that waited over 1 ms (limit 0.75%), event-loop "
            "lag p99 45 ms (limit 20 ms); ") in msgs[0]  # fmt: skip
    assert (
        "; its event loop was held: probe lag up to 45 ms, 3.0% of reads waited over 1 ms in their socket."
        in msgs[0]
    )
    assert msgs[0].endswith("look for blocking work in hooks or plugins (docs/self-check.md, Stalls).")


def test_a_server_that_batches_every_write_is_not_the_client():
    """A server that puts several events in each write (stream intervals, bunched output):
    most reads hold several events at any load; the client, on time, is not saturated."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 20, c, lag_ms=2.0, spike_ms=4.0, cpu=0.35, reads_per_s=5000, coalesced=0.8,
               late=0.001, wait=0.005)  # fmt: skip
    assert_quiet(mon, msgs)
    # 80 % of reads hold two events: 1.6 of every 1.7 token events came in such a read.
    assert mon.health_field()["server_coalesced"]["max_coalesced_event_pct"] == pytest.approx(94.1, abs=0.1)


def test_without_schedstat_the_causes_still_come_from_cpu_lag_and_late_reads():
    """A kernel without schedstat: wait is not measured (None, not 0) and not claimed."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=1.0, cpu=0.05, reads_per_s=1300, coalesced=0.01)
    assert_quiet(mon, msgs)
    assert mon.health_field()["max_run_queue_wait_pct"] is None and "waited for a CPU" not in (mon.note or "")
    msgs = run(mon, clock, 10, c, lag_ms=1.0, cpu=0.05, reads_per_s=1300, coalesced=0.01, late=0.03,
               late_coalesced=0.9)  # fmt: skip
    assert len(msgs) == 1 and "; its reads fell behind: " in msgs[0]
    assert (
        "% of reads waited over 1 ms in their socket (CPU 5.0% of a core, probe lag up to 1.0 ms)." in msgs[0]
    )


@pytest.mark.parametrize("value,text", [(2062.5489915, "2063"), (41.23, "41"), (5.24, "5.2"), (0.337, "0.34"),
                                        (0.0712, "0.071"), (0.1, "0.1"), (0, "0"), (10.0, "10")])  # fmt: skip
def test_numbers_are_rounded_to_what_matters(value, text):
    assert num(value) == text


def test_the_real_probe_logs_the_server_note_and_warns_nothing(monkeypatch, caplog):
    """The gevent probe with READS advancing as in the demo (1 % of reads coalesced, none
    late) and an idle, unstarved process: no warning; the note once, at INFO, and in the
    manifest."""
    import gevent

    from loadkit.client import stamps as httpstream

    counters = httpstream.ReadCounters()
    monkeypatch.setattr(httpstream, "READS", counters)
    stats = FakeStats()
    # The lag limit out of reach: this is about coalescing, and a loaded test machine lags.
    cfg = SelfCheckConfig(window_s=0.5, probe_s=0.005, eval_s=0.1, send_lag_ms=1000)
    check = SelfCheck(
        stats,
        cfg,
        cpu_s=lambda: 0.0,
        kernel_stamps=True,
        wait_s=lambda: 0.0,
        pressure_s=lambda: None,
        spawn=gevent.spawn,
        sleep=gevent.sleep,
    )

    def reads() -> None:
        while True:
            counters.reads += 100
            counters.kernel_stamped += 100
            counters.events += 91
            counters.coalesced += 1
            counters.coalesced_events += 2
            gevent.sleep(0.02)

    with caplog.at_level(logging.INFO, logger="loadkit.selfcheck"):
        check.start()
        g = gevent.spawn(reads)
        gevent.sleep(1.2)
        g.kill()
        check.stop()
    assert stats.warnings == []
    assert stats.manifest["client_saturation"] is None
    notes = [r for r in caplog.records if r.getMessage().startswith("server output seen on local")]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO
    assert stats.manifest["client_selfcheck"]["server_note"] == notes[0].getMessage()
    assert counters.late_ns == 1_000_000  # what the self-check counts as a late read


def test_sources_read_this_kernel_or_say_none(tmp_path):
    import gc

    wait = sources.run_queue_wait_s()
    assert wait is None or wait >= 0
    stat = tmp_path / "schedstat"
    stat.write_text("35735706 35547459 10\n")
    assert sources.run_queue_wait_s((str(tmp_path / "missing"), str(stat))) == pytest.approx(0.035547459)
    stat.write_text("garbage\n")
    assert sources.run_queue_wait_s((str(stat),)) is None
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=55.40 avg60=40.35 avg300=30.33 total=160343556\nfull avg10=0.00 avg60=0.00 "
                   "avg300=0.00 total=0\n")  # fmt: skip
    assert sources.cpu_pressure_s(str(psi)) == pytest.approx(160.343556)
    assert sources.cpu_pressure_s(str(tmp_path / "none")) is None
    before = sources.full_collections()
    gc.collect()
    assert sources.full_collections() == before + 1


def test_console_report_and_web_ui_show_the_same_words(caplog):
    """One function renders the message; the collector logs it (console), keeps it for the
    report (and the web UI's stats.json, which serves the report's warnings), and the HTML
    report shows it verbatim."""
    from html import escape

    from loadkit.report.page import build_html
    from loadkit.stats.collector import StatsCollector

    collector = StatsCollector()
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    with caplog.at_level(logging.WARNING, logger="loadkit.stats"):
        for text in run(mon, clock, 10, c, lag_ms=8.9, cpu=0.04, reads_per_s=1000, coalesced=0.06, late=0.1,
                        wait=0.17, late_coalesced=0.9):  # fmt: skip
            collector.warn(text)
        collector.warn(mon.summary_message())
    said = collector.warnings
    assert (
        len(said) == 2 and said[0].startswith("client saturated on local") and "Free the machine" in said[0]
    )
    assert [r.getMessage() for r in caplog.records if r.name == "loadkit.stats"] == said
    report = collector.report()
    assert report["warnings"][: len(said)] == said
    html = build_html(report, None)
    assert all(escape(text) in html for text in said)


def test_late_sends_and_server_coalescing_are_judged_apart():
    """Greenlets lag past 20 ms (sends late) while the reads, stamped by the kernel, stay on
    time and the server writes events together: only the sends are suspect."""
    from loadkit.selfcheck import SEND_SUSPECT

    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(
        mon, clock, 10, c, lag_ms=30, cpu=0.7, reads_per_s=30_000, coalesced=0.01, late=0.001, wait=0.01
    )
    assert len(msgs) == 1 and ": event-loop lag p99 30 ms (limit 20 ms); this process was busy" in msgs[0]
    assert "TTFT, ITL, TPOT and E2E stand" in msgs[0] and "reads holding several" not in msgs[0]
    assert mon.manifest_field()["suspect"] == SEND_SUSPECT and mon.manifest_field()["reasons"] == [
        "event_loop_lag"
    ]
    assert mon.note is not None and mon.health_field()["server_coalesced"]["windows"] >= 1


def test_one_or_two_coalesced_reads_in_a_small_window_are_not_judged():
    """A smoke run at 10 streams, starved (run-queue wait 9 %, 23 % of reads late), accurate
    (TTFT / ITL error p99 0.032 / 0.019 ms): while its streams ended, one window held ~300
    reads of which one or two coalesced, 0.3-0.7 %. Too few to move a p99: not judged."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 8, c, lag_ms=7.5, cpu=0.04, reads_per_s=1000, late=0.23, wait=0.09)
    msgs += run(mon, clock, 5, c, lag_ms=7.5, cpu=0.01, reads_per_s=60, late=0.23, coalesced=0.006, wait=0.09,
                late_coalesced=1.0)  # fmt: skip
    assert_quiet(mon, msgs)
    assert mon.health_field()["max_late_coalesced_event_pct"] > 1.0  # measured and kept, just not judged
    msgs = run(mon, clock, 6, c, lag_ms=7.5, cpu=0.04, reads_per_s=1000, late=0.23, coalesced=0.008, wait=0.09,
               late_coalesced=1.0)  # fmt: skip
    assert len(msgs) == 1 and "other processes held the CPU" in msgs[0]  # 40 in a window: judged


def test_a_few_users_first_tokens_are_judged_over_the_run():
    """4 users: 5 first tokens a second, 25 in a window — too few for a window's p99, while
    one spoiled first token in the run's first 50 moves the run's TTFT p99 (nearest rank:
    the largest of fewer than 100). A first token in a read the client left waiting is
    therefore judged over the run so far; one the server wrote together with the next, read
    on time, is not the client's."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=1.0, cpu=0.05, reads_per_s=800, firsts_per_s=5)
    c.first_coalesced += 1  # one first token in a read holding two, read on time
    msgs += run(mon, clock, 6, c, lag_ms=1.0, cpu=0.05, reads_per_s=800, firsts_per_s=5)
    assert_quiet(mon, msgs)
    assert mon.health_field()["max_first_coalesced_pct"] == pytest.approx(
        2.0
    )  # 1 in the 50 after the first sample
    c.first_coalesced += 1
    c.first_late_coalesced += 1  # ... and one the client left waiting in its socket
    msgs += run(mon, clock, 2, c, lag_ms=1.0, cpu=0.05, reads_per_s=800, firsts_per_s=5)
    assert len(msgs) == 1, msgs
    assert (
        ": 1.2% of first tokens so far came in reads holding several that waited over 1 ms (limit 0.75%)"
        in msgs[0]
    )
    assert "ttft_ms" in mon.manifest_field()["suspect"]


def test_first_tokens_over_the_run_are_judged_by_what_moves_its_p99():
    """Past 100 first tokens in the run, one the client left waiting cannot move its TTFT p99
    (nearest rank: the 117th of 118 stands whatever the 118th is): CI flagged a 4-user run for
    1 in 118 (0.85 %, over the 0.75 % limit) with its TTFT error p99 at 0.15 ms. Two can."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 24, c, lag_ms=1.0, cpu=0.05, reads_per_s=800, firsts_per_s=5)
    c.first_coalesced += 1
    c.first_late_coalesced += 1
    msgs += run(mon, clock, 2, c, lag_ms=1.0, cpu=0.05, reads_per_s=800, firsts_per_s=5)
    assert_quiet(mon, msgs)
    c.first_coalesced += 1
    c.first_late_coalesced += 1
    msgs += run(mon, clock, 2, c, lag_ms=1.0, cpu=0.05, reads_per_s=800, firsts_per_s=5)
    assert len(msgs) == 1 and "of first tokens so far came in reads holding several" in msgs[0], msgs


def test_out_of_cpu_with_kernel_stamps_suspects_sends_not_timestamps():
    """500 streams at 96 % of a core, reads kept apart (no coalescing of the client's):
    requests go out late and a closed loop sends less, while the kernel's stamps stand
    (truth: TTFT / ITL error p99 0.022 / 0.011 ms). Stamped in user space: everything."""
    from loadkit.selfcheck import SEND_SUSPECT

    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 10, c, lag_ms=8, cpu=0.96, reads_per_s=36_000, late=0.2, coalesced=0.0005)
    assert len(msgs) == 1 and ": CPU 96% of a core (limit 90%); this process was busy" in msgs[0]
    assert "TTFT, ITL, TPOT and E2E stand" in msgs[0]
    assert mon.manifest_field()["suspect"] == SEND_SUSPECT
    clock2, c2 = Clock(), Counters()
    mon2 = monitor(clock2, kernel_stamps=False)
    run(mon2, clock2, 10, c2, lag_ms=3, cpu=0.96, reads_per_s=36_000, kernel=0.0)
    assert mon2.manifest_field()["suspect"] == SUSPECT
