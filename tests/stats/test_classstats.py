"""Per-class stats: the same numbers as the engine stats for the same records, merged exactly."""

from __future__ import annotations

import pytest

from loadkit.stats import Slo, StatsCollector
from loadkit.stats.classstats import ClassStats
from tests.helpers.steady_records import record


def records():
    out = []
    for i in range(40):
        r = record(engine="fast", label="chat" if i % 3 else "long", send_ms=i * 50.0, ttft_ms=20.0 + i,
                   outcome="ok" if i % 10 else "http_error:503")  # fmt: skip
        r.user_class = "Chat" if i % 2 else "Agent"
        out.append(r)
    return out


def test_a_class_row_has_the_engine_sections_figures_for_its_requests():
    slos = (Slo("ttft_ms", 40.0),)
    chat_only = [r for r in records() if r.user_class == "Chat"]
    engine = StatsCollector(slos)
    classes = ClassStats(slos)
    for r in chat_only:
        engine.add(r)
        classes.add(r)
    want = engine.report()["engines"]["fast"]
    got = classes.report()["Chat"]["engines"]["fast"]
    for key in ("requests", "ok", "failures", "outcomes", "output_tokens", "input_tokens"):
        assert got[key] == want[key], key
    for metric in ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms"):
        assert got[metric] == want[metric], metric
    assert got["output_tokens_per_s"] == pytest.approx(want["output_tokens_per_s"])
    assert got["slo"]["good"] == want["slo"]["good"] and got["slo"]["judged"] == want["slo"]["judged"]
    assert set(got["labels"]) == {"chat", "long"}
    assert got["itl_ms"]["count"] == 0 and got["itl_ms"]["p50"] is None  # not kept per class: not measured


def test_nodes_merge_exactly_over_the_wire():
    whole, a, b = (ClassStats(wall_offset_ns=1_000) for _ in range(3))
    for i, r in enumerate(records()):
        whole.add(r)
        (a if i % 2 else b).add(r)
    merged = ClassStats()
    merged.merge(ClassStats.from_wire(a.to_wire()))
    merged.merge(ClassStats.from_wire(b.to_wire()))
    assert merged.report() == whole.report()
    report = whole.report()
    assert set(report) == {"Chat", "Agent"}
    assert sum(c["requests"] for c in report.values()) == 40
    # Rates over the engine's window: the classes' rates add up to the engine's.
    both = sum(c["engines"]["fast"]["requests_per_s"] for c in report.values())
    assert both == pytest.approx(40 / report["Chat"]["engines"]["fast"]["window_s"])


def test_records_without_a_class_are_not_counted_and_a_foreign_payload_is_refused():
    stats = ClassStats()
    stats.add(record())
    assert stats.report() == {}
    with pytest.raises(ValueError, match="version"):
        ClassStats.from_wire({"v": 99, "groups": []})
