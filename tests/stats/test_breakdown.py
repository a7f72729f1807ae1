"""The server-side breakdown in the stats: per stage distributions, dominance, merge, wire."""

from __future__ import annotations

import pytest

from loadkit.report.console import console_table
from loadkit.stats.aggregate import GroupStats
from loadkit.stats.breakdown import BreakdownStats, console_line
from loadkit.stats.report import group_section
from tests.helpers.records import record


def llama(prompt_ms: float, predicted_ms: float, n: int = 3) -> dict:
    return {
        "prompt_ms": prompt_ms,
        "predicted_ms": predicted_ms,
        "predicted_n": n,
        "prompt_n": 10,
        "cache_n": 0,
    }


def with_timings(ttft_ms: float, timings: dict | None, **kw):
    r = record(ttft_ms=ttft_ms, **kw)
    r.server_timings = timings
    return r


def test_stage_distributions_and_the_dominant_stage():
    b = BreakdownStats()
    for i in range(1, 101):  # prefill i ms, decode 2i ms, TTFT prefill + 1 ms
        b.add(with_timings(i + 1.0, llama(float(i), 2.0 * i)))
    b.add(with_timings(5.0, None))  # an engine that said nothing
    s = b.section()
    assert s["requests_reported"] == 100 and s["requests_not_reported"] == 1
    assert s["sources"] == {"llamacpp": 100}
    st = s["stages"]
    assert st["prefill_ms"]["p50"] == pytest.approx(50.0, rel=0.01)
    assert st["prefill_ms"]["p99"] == pytest.approx(99.0, rel=0.01)
    assert st["decode_ms"]["mean"] == pytest.approx(101.0, rel=0.01)
    assert st["residual_ttft_ms"]["p90"] == pytest.approx(1.0, rel=0.01)
    assert st["decode_per_token_ms"]["p50"] == pytest.approx(100.0 / 3, rel=0.01)
    assert st["queue_ms"] is None and st["load_ms"] is None  # never reported: not zeros
    assert s["dominant"]["ttft"]["stage"] == "prefill" and "compute-bound" in s["dominant"]["ttft"]["meaning"]
    assert s["dominant"]["e2e"]["stage"] == "decode" and "memory-bound" in s["dominant"]["e2e"]["meaning"]


def test_queue_dominates_when_the_server_waits():
    b = BreakdownStats()
    ollama = {"total_duration": 90_000_000, "load_duration": 0, "prompt_eval_duration": 2_000_000,
              "eval_duration": 8_000_000}  # fmt: skip
    b.add(with_timings(82.0, ollama))
    dom = b.section()["dominant"]
    assert dom["ttft"]["stage"] == dom["e2e"]["stage"] == "queue"
    assert dom["ttft"]["share"] == pytest.approx(80 / 82, rel=0.01)


def test_no_engine_timings_means_not_reported():
    b = BreakdownStats()
    b.add(with_timings(5.0, None))
    s = b.section()
    assert s["stages"] is None and s["dominant"] is None and s["requests_not_reported"] == 1
    assert console_line("e", s) is None


def test_negative_residual_is_counted_not_hidden():
    b = BreakdownStats()
    b.add(with_timings(3.0, llama(5.0, 1.0)))
    s = b.section()
    assert s["negative_residuals"] == 1 and s["stages"]["residual_ttft_ms"]["p50"] == 0.0


def test_group_stats_merge_and_wire_keep_the_breakdown():
    a, b = GroupStats(), GroupStats()
    for _ in range(10):
        a.add(with_timings(12.0, llama(10.0, 20.0)))
        b.add(with_timings(7.0, llama(5.0, 40.0)))
    b.add(record(outcome="http_error:500"))  # failures do not enter the breakdown
    a.merge(GroupStats.from_wire(b.to_wire()))
    s = group_section(a, (), 1.0)["server_breakdown"]
    assert s["requests_reported"] == 20 and s["requests_not_reported"] == 0
    assert s["stages"]["prefill_ms"]["mean"] == pytest.approx(7.5, rel=0.01)
    assert s["stages"]["residual_ttft_ms"]["mean"] == pytest.approx(2.0, rel=0.01)
    assert (
        GroupStats.from_wire({**b.to_wire(), "breakdown": None}).breakdown.section()["requests_reported"] == 0
    )


def test_console_says_where_the_time_goes():
    g = GroupStats()
    for _ in range(5):
        g.add(with_timings(12.0, llama(10.0, 20.0)))
    section = group_section(g, (), 1.0)
    report = {"valid": True, "engines": {"sim": section}, "workers": {"lost": 0}}
    line = [x for x in console_table(report).splitlines() if x.startswith("server breakdown")]
    assert line == [console_line("sim", section["server_breakdown"])]
    assert "prefill 10.0" in line[0] and "TTFT prefill: compute-bound" in line[0]
    assert "E2E decode: memory-bound" in line[0]
