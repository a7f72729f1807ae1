"""Aggregation from synthetic records: metrics, outcomes, SLOs, conservation, time series."""

from __future__ import annotations

import pytest

from loadkit.records import e2e_ms, itl_chunk_ms, itl_token_ms, tpot_ms, ttft_from_schedule_ms, ttft_ms
from loadkit.stats import Slo, StatsCollector
from loadkit.stats.aggregate import FLUSH_RECORDS, GroupStats
from loadkit.stats.histogram import MAX_RELATIVE_ERROR
from tests.helpers.records import BASE, MS, record

# Wall clock = monotonic + WALL_OFFSET; BASE lands exactly on a second boundary.
WALL_OFFSET = 1_700_000_000 * 10**9 - BASE


def collector(slos: tuple[Slo, ...] = ()) -> StatsCollector:
    return StatsCollector(slos, wall_clock_ns=lambda: BASE + WALL_OFFSET, mono_clock_ns=lambda: BASE)


def approx(value: float) -> object:
    return pytest.approx(value, rel=MAX_RELATIVE_ERROR)


def test_each_metric_matches_loadkit_records():
    r = record(ttft_ms=123.456, gaps_ms=(7.5, 30.25, 1.0), tokens=(1, 3, 1, 2), sched_ms=-4.0, tail_ms=2.0)
    group = GroupStats()
    group.add(r)
    group.flush()
    for name, expected in (("ttft_ms", ttft_ms(r)), ("ttft_sched_ms", ttft_from_schedule_ms(r)),
                           ("tpot_ms", tpot_ms(r)), ("e2e_ms", e2e_ms(r))):  # fmt: skip
        hist = group.hists[name]
        assert hist.count == 1 and hist.min == pytest.approx(expected * MS, abs=1), name
    chunks = sorted(v / MS for v in _values(group, "itl_chunk_ms"))
    assert chunks == pytest.approx(sorted(itl_chunk_ms(r)), rel=MAX_RELATIVE_ERROR)
    expected_tokens = sorted(v for v, k in itl_token_ms(r) for _ in range(k))
    per_token = sorted(v / MS for v in _values(group, "itl_ms"))
    assert per_token == pytest.approx(expected_tokens, rel=MAX_RELATIVE_ERROR)
    assert group.hists["itl_ms"].total == pytest.approx(sum(v * k for v, k in itl_token_ms(r)) * MS, abs=3)


def _values(group: GroupStats, name: str) -> list[float]:
    """Every value a histogram holds, as bucket midpoints."""
    from loadkit.stats.histogram import bucket_value

    return [bucket_value(i) for i, n in group.hists[name].counts.items() for _ in range(n)]


def test_known_ttfts_give_known_percentiles():
    c = collector()
    for i in range(1, 1001):
        c.add(record(ttft_ms=float(i), send_ms=i))
    s = c.report()["engines"]["e"]["ttft_ms"]
    assert s["count"] == 1000
    assert (s["min"], s["max"], s["mean"]) == (1.0, 1000.0, pytest.approx(500.5))
    assert s["p50"] == approx(500) and s["p90"] == approx(900) and s["p99"] == approx(990)
    assert s["p999"] == approx(999)


def test_outcomes_all_counted_latencies_only_from_ok():
    c = collector()
    c.add(record(ttft_ms=10))
    c.add(record(outcome="http_error:503", ttft_ms=None))
    c.add(record(outcome="disconnected", ttft_ms=5000))
    c.add(record(outcome="cancelled", ttft_ms=None))
    e = c.report()["engines"]["e"]
    # cancelled (the test stopped it) is counted apart, not as a failure
    assert e["requests"] == 4 and e["ok"] == 1 and e["failures"] == 2 and e["cancelled"] == 1
    assert e["outcomes"] == {"ok": 1, "http_error:503": 1, "disconnected": 1, "cancelled": 1}
    assert e["ttft_ms"]["count"] == 1 and e["ttft_ms"]["max"] == approx(10)


def test_engines_and_labels_kept_apart_and_engine_is_their_exact_merge():
    c = collector()
    for i in range(100):
        c.add(record(engine="a", label="short", ttft_ms=10 + i))
        c.add(record(engine="a", label="long", ttft_ms=1000 + i))
        c.add(record(engine="b", ttft_ms=1))
    report = c.report()
    a = report["engines"]["a"]
    assert set(report["engines"]) == {"a", "b"} and set(a["labels"]) == {"short", "long"}
    assert a["requests"] == 200 and a["labels"]["short"]["ttft_ms"]["max"] == approx(109)
    assert a["ttft_ms"]["p50"] == approx(109) and a["ttft_ms"]["p99"] == approx(1097)
    assert report["engines"]["b"]["ttft_ms"]["p99"] == approx(1)


def test_itl_per_token_differs_from_per_chunk_for_coalesced_events():
    c = collector()
    c.add(record(gaps_ms=(40.0,) * 10, tokens=(1,) + (4,) * 10))  # each 40 ms event carries 4 tokens
    e = c.report()["engines"]["e"]
    assert e["itl_chunk_ms"]["count"] == 10 and e["itl_chunk_ms"]["p50"] == approx(40)
    assert e["itl_ms"]["count"] == 40 and e["itl_ms"]["p50"] == approx(10)
    assert e["tpot_ms"]["p50"] == approx(400 / 40)


def test_long_records_and_batch_flushes_change_nothing():
    long_record = record(gaps_ms=tuple(float(i % 7 + 1) for i in range(300)))
    batched, single = GroupStats(), GroupStats()
    for _ in range(FLUSH_RECORDS + 5):
        batched.add(long_record)
    for _ in range(FLUSH_RECORDS + 5):
        single.add(long_record)
        single.flush()
    batched.flush()
    assert batched.to_wire() == single.to_wire()
    assert batched.hists["itl_chunk_ms"].count == 300 * (FLUSH_RECORDS + 5)


def test_token_totals_and_distributions():
    c = collector()
    c.add(record(n_in=100, cached=40, tokens=(1, 1, 1)))
    c.add(record(n_in=300, cached=None, tokens=(1, 1, 1, 1, 1)))
    c.add(record(outcome="http_error:500", ttft_ms=None, n_in=50))
    e = c.report()["engines"]["e"]
    assert (e["input_tokens"], e["cached_tokens"], e["output_tokens"]) == (450, 40, 8)
    assert e["n_in"]["count"] == 3 and e["n_cached"]["count"] == 1 and e["n_out"]["p50"] == 3
    assert e["n_out_sources"] == {"usage": 3}


def test_slo_goodput_and_attainment():
    slos = (Slo("ttft_ms", 100.0), Slo("tpot_ms", 20.0))
    c = collector(slos)
    c.add(record(send_ms=0, ttft_ms=50, gaps_ms=(10, 10)))  # good
    c.add(record(send_ms=500, ttft_ms=150, gaps_ms=(10, 10)))  # TTFT violated
    c.add(record(send_ms=1000, ttft_ms=50, gaps_ms=(30, 30)))  # TPOT violated
    c.add(record(send_ms=1500, ttft_ms=50, gaps_ms=()))  # one token: TPOT not measured → good
    c.add(record(send_ms=1900, outcome="timeout_total", ttft_ms=None))  # judged, never good
    c.add(record(send_ms=1900, outcome="cancelled", ttft_ms=None))  # stopped by us: not judged
    e = c.report()["engines"]["e"]
    slo = e["slo"]
    assert (slo["good"], slo["judged"]) == (2, 5)
    assert slo["attainment"]["ttft_ms"] == {"limit_ms": 100.0, "met": 3, "violated": 1, "not_measured": 0,
                                            "attainment": 3 / 5}  # fmt: skip
    assert slo["attainment"]["tpot_ms"]["not_measured"] == 1
    assert e["goodput_per_s"] == pytest.approx(2 / e["window_s"])
    assert e["window_s"] == pytest.approx(1.901)  # first send 0 ms, last end 1900 + 1 ms


def test_no_slos_means_no_goodput_rather_than_zero():
    c = collector()
    c.add(record())
    e = c.report()["engines"]["e"]
    assert e["slo"] is None and e["goodput_per_s"] is None


def test_conservation_open_loop():
    c = collector()
    c.add_scheduled(6)
    c.add_dropped(2)
    for _ in range(3):
        c.add(record())
    live = c.report()  # one request still in flight: fine while running
    assert live["conservation"]["in_flight"] == 1 and live["conservation"]["holds"] and live["valid"]
    c.mark_stopped()
    stopped = c.report()  # ... but not once the run is over
    assert not stopped["conservation"]["holds"] and not stopped["valid"]
    c.add(record(outcome="cancelled"))
    assert c.report()["conservation"] == {"scheduled": 6, "sent": 4, "dropped": 2, "outcomes_total": 4,
                                          "in_flight": 0, "lost_in_flight": 0, "holds": True}  # fmt: skip
    c.add(record())  # more sent than scheduled never holds
    assert not c.report()["conservation"]["holds"]


def test_conservation_without_scheduling_counts():
    c = collector()
    c.add(record())
    c.mark_stopped()
    assert c.report()["conservation"] == {"scheduled": None, "sent": 1, "dropped": 0, "outcomes_total": 1,
                                          "in_flight": 0, "lost_in_flight": 0, "holds": True}  # fmt: skip


def test_throughput_over_measured_window():
    c = collector()
    for i in range(10):  # 10 requests, each 3 output tokens, sends 100 ms apart, last ends at 921 ms + 1
        c.add(record(send_ms=100 * i, ttft_ms=1, gaps_ms=(10, 10), tail_ms=0))
    e = c.report()["engines"]["e"]
    assert e["window_s"] == pytest.approx(0.921)
    assert e["requests_per_s"] == pytest.approx(10 / 0.921)
    assert e["output_tokens_per_s"] == pytest.approx(30 / 0.921)


def test_timeseries_counts_and_mean_in_flight():
    c = collector()
    # A: 0.5 s → 2.5 s; B: 1.2 s → 1.7 s (its end second is 1).
    c.add(record(send_ms=500, ttft_ms=100, gaps_ms=(1899.0,), tail_ms=1.0))
    c.add(record(send_ms=1200, ttft_ms=100, gaps_ms=(399.0,), tail_ms=1.0))
    series = c.report()["engines"]["e"]["timeseries"]
    assert series["t"] == [0, 1, 2]
    assert series["requests"] == [0, 1, 1] and series["output_tokens"] == [0, 2, 2]
    assert series["in_flight"] == [0.5, 1.5, 0.5]
    assert series["unix"][0] == 1_700_000_000


def test_an_exception_in_the_stats_path_marks_the_run_invalid_and_does_not_raise():
    c = collector()
    bad = record()
    bad.n_in = "many"  # type: ignore[assignment]
    c.add(bad)
    c.add(record())
    report = c.report()
    assert not report["valid"] and "stats path failed" in report["errors"][0]
    assert report["engines"]["e"]["ok"] >= 1


def test_reset_forgets_everything_and_bumps_epoch():
    c = collector()
    c.add(record())
    c.add_scheduled(1)
    epoch = c.epoch
    c.reset()
    assert c.report()["engines"] == {} and c.epoch == epoch + 1 and c.scheduled == 0
