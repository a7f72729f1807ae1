"""Each engine's own per-request timings, from real captures, normalised and joined (issue 26)."""

from __future__ import annotations

import pytest

from loadkit import types as t
from loadkit.core.servertimings import join, normalise
from loadkit.engines.base import AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.records import RequestRecord
from tests.helpers.wire import body_bytes, replay


def last_timings(adapter, fixture: str):
    r = replay(adapter, body_bytes(fixture))
    assert r.outcome == t.OK
    sent = [e.server_timings for e in r.events if e.server_timings is not None]
    return sent[-1] if sent else None


def test_llamacpp_native_timings():
    raw = last_timings(LlamaCppAdapter(AdapterOptions(api="native")), "llamacpp/native_completion.txt")
    b = normalise(raw)
    assert b is not None and b["source"] == "llamacpp"
    assert b["prefill_ms"] == 0.915 and b["decode_ms"] == 8.763
    assert b["prompt_n"] == 1 and b["cached_n"] == 26 and b["decode_n"] == 16
    assert b["decode_per_token_ms"] == pytest.approx(8.763 / 16)
    assert b["server_total_ms"] == pytest.approx(0.915 + 8.763)
    assert b["queue_ms"] is None and b["load_ms"] is None  # llama.cpp does not say: not 0


@pytest.mark.parametrize(("api", "fixture", "prefill", "decode"), [
    ("chat", "llamacpp/chat_completions.txt", 2.929, 7.374),
    ("completions", "llamacpp/completions.txt", 2.697, 7.996),
])  # fmt: skip
def test_llamacpp_openai_api_timings(api, fixture, prefill, decode):
    b = normalise(last_timings(LlamaCppAdapter(AdapterOptions(api=api)), fixture))
    assert b is not None and (b["prefill_ms"], b["decode_ms"], b["decode_n"]) == (prefill, decode, 16)


def test_ollama_durations_in_ns():
    b = normalise(
        last_timings(OllamaAdapter(AdapterOptions(model="llama3.2", api="native")), "ollama/generate.ndjson")
    )
    assert b is not None and b["source"] == "ollama"
    assert b["load_ms"] == pytest.approx(6338.219291)
    assert b["prefill_ms"] == pytest.approx(130.079)
    assert b["decode_ms"] == pytest.approx(4232.71)
    assert b["server_total_ms"] == pytest.approx(10706.818083)
    # The rest of total_duration: what the server spent outside load, prompt and eval.
    assert b["queue_ms"] == pytest.approx(10706.818083 - 6338.219291 - 130.079 - 4232.71)
    assert b["decode_per_token_ms"] == pytest.approx(4232.71 / 3) and b["prompt_n"] == 26


def test_sglang_native_meta_info():
    raw = last_timings(SGLangAdapter(AdapterOptions(api="native")), "sglang/native_generate.sse")
    assert raw == {"e2e_latency": 0.08, "prompt_tokens": 7, "completion_tokens": 4, "cached_tokens": 4}
    b = normalise(raw)
    assert b is not None and b["source"] == "sglang"
    assert b["server_total_ms"] == pytest.approx(80.0)
    assert b["prefill_ms"] is None and b["decode_ms"] is None and b["queue_ms"] is None
    assert join(raw, 50.0)["residual_ttft_ms"] is None  # no prefill reported: no residual


def test_sglang_queue_time_with_metrics():
    b = normalise({"e2e_latency": 0.5, "queue_time": 0.125})
    assert b is not None and b["queue_ms"] == 125.0 and b["server_total_ms"] == 500.0


def test_tgi_stream_reports_nothing():
    # TGI sets its x-*-time headers on the non-streamed /generate only; the stream has none.
    assert last_timings(TGIAdapter(AdapterOptions(api="native")), "tgi/generate_stream.sse") is None


@pytest.mark.parametrize("raw", [None, {}, {"foo": 1}, {"prompt_ms": "fast", "predicted_ms": None},
                                 {"eval_duration": -5}, "timings"])  # fmt: skip
def test_nothing_usable_is_not_reported(raw):
    assert normalise(raw) is None
    assert join(raw, 12.0) is None


def test_join_takes_the_servers_stages_out_of_ttft():
    llama = {"prompt_ms": 4.0, "predicted_ms": 30.0, "predicted_n": 10}
    b = join(llama, 10.0, 27.0)
    assert b["residual_ttft_ms"] == pytest.approx(6.0)
    assert b["client_decode_per_token_ms"] == pytest.approx(2.7)
    ollama = {"total_duration": 9_000_000, "load_duration": 1_000_000, "prompt_eval_duration": 2_000_000,
              "eval_duration": 5_000_000}  # fmt: skip
    assert join(ollama, 5.5)["residual_ttft_ms"] == pytest.approx(5.5 - 1.0 - 1.0 - 2.0)
    assert join(llama, None)["residual_ttft_ms"] is None  # no token seen: not measured


def test_record_json_carries_the_joined_breakdown():
    rec = RequestRecord(request_id="r", engine="e", adapter="llamacpp", t_send_ns=1_000_000,
                        event_t_ns=[11_000_000, 21_000_000], event_tokens=[1, 1], n_out=2,
                        server_timings={"prompt_ms": 7.5, "predicted_ms": 10.0, "predicted_n": 2})  # fmt: skip
    row = rec.to_json()
    assert row["server_timings"] == rec.server_timings
    b = row["server_breakdown"]
    assert b["residual_ttft_ms"] == pytest.approx(10.0 - 7.5)
    assert b["client_decode_per_token_ms"] == pytest.approx(5.0)
    assert RequestRecord(request_id="x", engine="e", adapter="tgi").to_json()["server_breakdown"] is None
