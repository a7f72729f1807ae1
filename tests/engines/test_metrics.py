import math
from pathlib import Path

import pytest

from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.metrics import (
    MetricsError,
    MetricsScraper,
    neutral_metrics,
    parse_labels,
    parse_prometheus,
    scrape,
)
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.vllm import VLLMAdapter

FIX = Path(__file__).parent / "fixtures"


def samples(name):
    return parse_prometheus((FIX / name).read_text())


def test_real_llamacpp_metrics():
    parsed = samples("llamacpp/metrics.txt")
    by_name = {s.name: s.value for s in parsed}
    assert by_name["llamacpp:prompt_tokens_cached_total"] == 1519
    assert by_name["llamacpp:prompt_seconds_total"] == pytest.approx(7.40902)
    out = neutral_metrics(LlamaCppAdapter.metric_names, parsed)
    assert out["running"] == 0 and out["waiting"] == 0
    # cached / (cached + processed): prompt_tokens_total excludes cached tokens
    assert out["prefix_hit_rate"] == pytest.approx(1519 / (1519 + 2035))
    assert "kv_usage" not in out  # this build no longer exports it: absent, not 0


def test_vllm_sums_engines_averages_ratios_and_derives_hit_rate():
    out = neutral_metrics(VLLMAdapter.metric_names, samples("vllm/metrics.txt"))
    assert out["running"] == 5 and out["waiting"] == 8
    assert out["kv_usage"] == pytest.approx(0.375)
    assert out["prefix_hit_rate"] == pytest.approx(800 / 2000)


def test_sglang_gauges():
    out = neutral_metrics(SGLangAdapter.metric_names, samples("sglang/metrics.txt"))
    assert out == {"running": 4, "waiting": 9, "kv_usage": 0.28, "prefix_hit_rate": 0.75}


def test_triton_label_selectors_and_kv_from_blocks():
    out = neutral_metrics(TensorRTLLMAdapter.metric_names, samples("tensorrt-llm/triton_metrics.txt"))
    assert out["running"] == 6 and out["active_requests"] == 6 and out["waiting"] == 2
    assert out["kv_usage"] == pytest.approx(300 / 1200)


def test_parser_edge_cases():
    text = ('# TYPE a gauge\na{x="q\\"uote",y="back\\\\slash"} +Inf 1712345678000\n'
            'b NaN\nc{} -1.5e3\nd{le="0.5"} 2 # {trace_id="abc"} 1.0\n')
    parsed = parse_prometheus(text)
    assert parsed[0].labels == {"x": 'q"uote', "y": "back\\slash"} and parsed[0].value == math.inf
    assert math.isnan(parsed[1].value) and parsed[2].value == -1500 and parsed[3].value == 2
    assert parse_labels('{a="1",}') == {"a": "1"}


@pytest.mark.parametrize("bad", ["just words here", 'm{a=1} 2', "m 1x"])
def test_bad_lines_are_errors_not_skipped(bad):
    with pytest.raises(MetricsError):
        parse_prometheus(f"ok 1\n{bad}\n")


def test_scraper_interval_hit_rate_and_errors():
    rows = iter([
        {"prefix_cache_hits": 100.0, "prefix_cache_queries": 400.0},
        MetricsError("HTTP 503"),
        {"prefix_cache_hits": 190.0, "prefix_cache_queries": 500.0},
    ])

    def fetch():
        row = next(rows)
        if isinstance(row, Exception):
            raise row
        return dict(row)

    clock = iter([1.0, 2.0, 3.0])
    s = MetricsScraper(VLLMAdapter(), "http://127.0.0.1:1", fetch=fetch, clock=lambda: next(clock))
    first, failed, third = s.sample(), s.sample(), s.sample()
    assert "prefix_hit_rate_interval" not in first["values"]
    assert failed == {"t": 2.0, "values": {}, "error": "HTTP 503"} and s.errors == 1
    assert third["values"]["prefix_hit_rate_interval"] == pytest.approx(90 / 100)


def test_scrape_refuses_engine_without_metrics():
    with pytest.raises(MetricsError):
        scrape(OllamaAdapter(), "http://127.0.0.1:1")


def test_scrape_unreachable_is_metrics_error():
    with pytest.raises(MetricsError):
        scrape(VLLMAdapter(), "http://127.0.0.1:9", timeout_s=0.5)
