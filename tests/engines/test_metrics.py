import math
from pathlib import Path

import pytest

from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.servers.metrics import (
    MetricsError,
    MetricsScraper,
    neutral_metrics,
    parse_prometheus,
    parse_selector,
    scrape,
)

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
    text = (
        '# TYPE a gauge\na{x="q\\"uote",y="back\\\\slash"} +Inf 1712345678000\n'
        'b NaN\nc{} -1.5e3\nd{le="0.5"} 2 # {trace_id="abc"} 1.0\n'
    )
    parsed = parse_prometheus(text)
    assert parsed[0].labels == {"x": 'q"uote', "y": "back\\slash"} and parsed[0].value == math.inf
    assert math.isnan(parsed[1].value) and parsed[2].value == -1500 and parsed[3].value == 2
    assert parse_selector('m{a="1",}') == ("m", {"a": "1"})


@pytest.mark.parametrize("bad", ["just words here", "m{a=1} 2", "m 1x", "{", 'm{a="b" 1'])
def test_bad_lines_are_errors_not_skipped(bad):
    with pytest.raises(MetricsError, match=r"^line 3 is not Prometheus text"):
        parse_prometheus(f"# TYPE ok gauge\nok 1\n{bad}\n")


def test_scraper_interval_hit_rate_and_errors():
    rows = iter(
        [
            {"prefix_cache_hits": 100.0, "prefix_cache_queries": 400.0},
            MetricsError("HTTP 503"),
            {"prefix_cache_hits": 190.0, "prefix_cache_queries": 500.0},
        ]
    )

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


# A label value holding " # " (which the old hand-written parser cut as an exemplar), escaped
# quotes, a backslash and a newline; the model name is the kind of value that carries them.
ODD_MODEL = 'org/m "q" # 7b\\x\nv2'
ODD_TEXT = (
    "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0",model_name="org/m \\"q\\" # 7b\\\\x\\nv2"} 3\n'
    'vllm:num_requests_running{engine="1",model_name="other # one"} 4\n'
)


def test_label_values_with_hash_quotes_and_newlines():
    parsed = parse_prometheus(ODD_TEXT)
    assert [s.labels["model_name"] for s in parsed] == [ODD_MODEL, "other # one"]
    assert [s.value for s in parsed] == [3, 4]
    selector = 'vllm:num_requests_running{model_name="org/m \\"q\\" # 7b\\\\x\\nv2"}'
    assert parse_selector(selector) == ("vllm:num_requests_running", {"model_name": ODD_MODEL})
    assert neutral_metrics({selector: "running"}, parsed) == {"running": 3}
    assert neutral_metrics(VLLMAdapter.metric_names, parsed)["running"] == 7  # both engines summed


def test_simulator_escapes_label_values_it_emits():
    from loadkit.sim.metrics import _label, _render

    text = _render(
        [("vllm:num_requests_running", "gauge", "Running.", 2)], f'{{model_name="{_label(ODD_MODEL)}"}}'
    )
    (sample,) = parse_prometheus(text.decode())
    assert sample.labels == {"model_name": ODD_MODEL} and sample.value == 2


class _Exposition:
    """A real HTTP server on loopback answering /metrics with a fixed body."""

    def __init__(self, body: str) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_scrape_over_http_reads_odd_label_values():
    with _Exposition(ODD_TEXT) as srv:
        assert scrape(VLLMAdapter(), srv.url)["running"] == 7


def test_malformed_exposition_names_the_url_and_line():
    with _Exposition(ODD_TEXT + 'vllm:num_requests_waiting{engine="0" 5\n') as srv:
        with pytest.raises(MetricsError) as info:
            scrape(VLLMAdapter(), srv.url)
    message = str(info.value)
    assert message.startswith(f"GET {srv.url}/metrics: line 5 is not Prometheus text")
    assert "vllm:num_requests_waiting{engine=" in message
    scraper = MetricsScraper(VLLMAdapter(), srv.url)
    row = scraper.sample()  # the server is gone now: a counted error row, not a crash
    assert row["values"] == {} and row["error"].startswith(f"GET {srv.url}/metrics") and scraper.errors == 1
