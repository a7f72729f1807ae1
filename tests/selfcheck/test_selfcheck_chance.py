"""Reads that wait by chance: at a few hundred streams a decode step's reads queue behind each
other and a quarter of them wait over 1 ms in their sockets while every timestamp is right
(kernel stamps). A server that writes several events at once then has a quarter of those reads
late too — not the client's coalescing. The windows below are recorded (LOADKIT_SELFCHECK_TRACE,
with the truth log's error for the same span, docs/self-check.md "Reads that wait by chance")."""

from __future__ import annotations

from loadkit.client.stamps import ReadCounts
from loadkit.selfcheck import SelfCheckConfig, judge
from loadkit.selfcheck.window import Sample, client_share, measure
from tests.helpers.selfcheck import Clock, Counters, monitor, run

MS = 1_000_000


def recorded(cpu_pct: float, span_s: float, *, reads: int, kernel: int, late: int, coalesced: int, events: int,
             coalesced_events: int, late_coalesced: int, late_coalesced_events: int, lags_ms: list[float]):  # fmt: skip
    """The window between two samples holding a trace row's counts (the run's cumulative
    counters before the window are immaterial: only differences are judged)."""
    first = Sample(t_ns=10**12, cpu_s=100.0, counts=ReadCounts(firsts=1_000))
    counts = ReadCounts(reads=reads, kernel_stamped=kernel, late=late, coalesced=coalesced, firsts=1_000 + 660,
                        events=events, coalesced_events=coalesced_events, late_coalesced=late_coalesced,
                        late_coalesced_events=late_coalesced_events)  # fmt: skip
    last = Sample(t_ns=10**12 + int(span_s * 1e9), cpu_s=100.0 + cpu_pct / 100 * span_s, counts=counts)
    return measure(first, last, [int(v * MS) for v in lags_ms])


def lags(p99_ms: float, max_ms: float) -> list[float]:
    """250 probe samples (5 s at 20 ms) with that p99 and max."""
    return [1.0] * 246 + [p99_ms] * 3 + [max_ms]


def test_a_server_writing_events_together_read_late_by_chance_is_not_the_clients():
    """200 closed-loop streams, 20 ms steps, the simulator writing a reasoning and an answer
    event together once a request (--reasoning-mean-tokens 16 --spec-tokens 4
    --output-us-per-event 0), client SCHED_FIFO: 45 % of a core, no run-queue wait. 4.0 % of
    token events came in reads holding two; 26 % of all reads waited over 1 ms (a step's reads
    queue up), 21 % of those holding two: 0.85 % of token events in late coalesced reads, over the
    0.75 % limit, so it said "arrival_lag, cause stall" in 10 of 15 windows. Truth for this
    window: ITL error p99 0.055 ms (0.17 % of samples over 1 ms), TTFT error p99 0.048 ms."""
    w = recorded(44.35, 5.044, reads=40392, kernel=40320, late=10559, coalesced=796, events=39537,
                 coalesced_events=1592, late_coalesced=169, late_coalesced_events=338,
                 lags_ms=lags(8.88, 17.28))  # fmt: skip
    assert w.late_coalesced_event_pct is not None and w.late_coalesced_event_pct > 0.75  # what tripped before
    assert w.client_coalesced_event_pct == 0.0  # no more late than any read: none of it the client's
    v = judge(w, SelfCheckConfig(), kernel=True)
    assert not v.saturated and v.reasons == frozenset() and v.server  # said once, as the server's output


def test_a_starved_client_whose_coalesced_reads_all_waited_is_still_flagged():
    """The same 200 streams at normal priority on the loaded machine (nice -15): run-queue wait
    21 %, 24 % of reads late, and every read holding several late: 2.9 % of token events. Truth
    for this window: ITL error p99 2.9 ms, 2.8 % of samples over 1 ms."""
    w = recorded(15.84, 5.068, reads=17114, kernel=17114, late=4156, coalesced=221, events=15247,
                 coalesced_events=442, late_coalesced=221, late_coalesced_events=442,
                 lags_ms=lags(27.6, 63.8))  # fmt: skip
    assert w.client_coalesced_event_pct is not None and w.client_coalesced_event_pct > 2.5
    v = judge(w, SelfCheckConfig(), kernel=True)
    assert "arrival_lag" in v.reasons and "itl_ms" in v.suspect and "ttft_ms" in v.suspect


def test_the_clients_share_of_late_coalesced_events():
    # Late as often as any read: chance. Always late while a few reads are: nearly all the client's.
    assert client_share(1.0, 4.0, 0.25) == 0.0
    assert client_share(2.0, 2.0, 0.25) == 2.0
    assert abs(client_share(1.0, 2.0, 0.1) - (1.0 - 0.2) / 0.9) < 1e-9
    # No reads late, no share known, or most reads late (no power to tell chance apart): as counted.
    assert client_share(1.0, 2.0, 0.0) == 1.0 and client_share(None, 2.0, 0.3) is None
    assert client_share(1.5, 2.0, 0.6) == 1.5


def test_many_streams_with_reads_late_by_chance_do_not_warn():
    """The monitor over 20 s of such a run: 8,000 reads/s, 27 % late, 2 % holding two events the
    server wrote together and read late as often as any read (the helper's default)."""
    clock, c = Clock(), Counters()
    mon = monitor(clock)
    msgs = run(mon, clock, 20, c, lag_ms=2.0, spike_ms=17.0, spike_every=1, cpu=0.45, reads_per_s=8000,
               late=0.27, coalesced=0.02, wait=0.001, pressure=0.9)  # fmt: skip
    assert msgs == [] and mon.manifest_field() is None
    health = mon.health_field()
    assert health["max_late_coalesced_event_pct"] > 0.75 and health["max_client_coalesced_event_pct"] < 0.1
    assert mon.note is not None and "27% of reads late and 27% of those holding several" in mon.note


def test_a_busy_client_is_not_given_the_benefit_of_chance():
    """At 70 % of a core the reads of a burst queue for milliseconds and a coalesced read of the
    client's making often looks on time: 0.9 % of token events in late coalesced reads with 30 %
    of reads late would be 0.43 % "beyond chance", yet it is the client's. Counted as it is."""
    w = recorded(70.0, 5.0, reads=40000, kernel=40000, late=12000, coalesced=400, events=40000,
                 coalesced_events=800, late_coalesced=180, late_coalesced_events=360,
                 lags_ms=lags(9.0, 15.0))  # fmt: skip
    assert w.client_coalesced_event_pct is not None and w.client_coalesced_event_pct < 0.75
    v = judge(w, SelfCheckConfig(), kernel=True)
    assert "arrival_lag" in v.reasons and v.cause == "busy"
