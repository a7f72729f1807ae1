"""Scraped server metrics as the Benchmark Report's observability (loadkit/report/llmdobserve.py)."""

from __future__ import annotations

import json
from pathlib import Path

from loadkit.report.llmd import benchmark_reports, schema_errors
from loadkit.report.llmdobserve import component_observability, sample_statistics

RECORDED = Path(__file__).parent / "data" / "llmd_two_targets_report.json"


def _sample(t: float, **values: float) -> dict[str, object]:
    return {"t": t, "values": values, "error": None}


SCRAPES = {
    "interval_s": 1.0,
    "samples": [
        _sample(1.0, running=1, waiting=0, kv_usage=0.10, preemptions_total=0),
        _sample(2.0, running=4, waiting=2, kv_usage=0.25, preemptions_total=3),
        {"t": 3.0, "values": {}, "error": "ConnectionRefusedError"},  # a failed scrape: no values
        _sample(4.0, running=3, waiting=1, kv_usage=float("nan")),
        _sample(5.0, running=2, waiting=1, kv_usage=0.40),
    ],
}


def test_gauges_become_statistics_over_the_samples():
    component = component_observability("vllm-a", SCRAPES)
    assert component is not None and component["component_label"] == "vllm-a"
    aggregate = component["aggregate"]
    assert set(aggregate) == {"kv_cache_usage", "running_requests", "waiting_requests"}  # no counters
    kv = aggregate["kv_cache_usage"]
    assert kv["units"] == "percent" and kv["min"] == 10.0 and kv["max"] == 40.0  # the NaN sample left out
    assert kv["mean"] == 25.0 and kv["p50"] == 25.0
    running = aggregate["running_requests"]
    assert running == {"units": "count", "mean": 2.5, "min": 1.0, "max": 4.0, "p50": 2.0, "p90": 4.0,
                       "p95": 4.0, "p99": 4.0}  # fmt: skip


def test_nearest_rank_on_samples():
    stats = sample_statistics([float(v) for v in range(1, 11)], "count")
    assert (stats["p50"], stats["p90"], stats["p95"], stats["p99"]) == (5.0, 9.0, 10.0, 10.0)


def test_no_scrape_no_observability():
    assert component_observability("x", None) is None
    assert component_observability("x", {"samples": [{"t": 1.0, "values": {}, "error": "boom"}]}) is None


def test_a_report_with_scrapes_validates():
    report = json.loads(RECORDED.read_text())
    report["manifest"]["server_metrics"] = {"sglang-b": SCRAPES}
    documents = benchmark_reports(report)
    assert "observability" not in documents["fast"]["results"]
    observed = documents["sglang-b"]["results"]["observability"]["components"]
    assert [c["component_label"] for c in observed] == ["sglang-b"]
    assert (
        documents["sglang-b"]["scenario"]["stack"][0]["metadata"]["label"] == "sglang-b"
    )  # it names a component
    assert schema_errors(documents["sglang-b"]) == []
