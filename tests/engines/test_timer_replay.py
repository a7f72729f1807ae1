"""Each adapter through the real stream timer over a loopback socket, the server replaying a
recorded stream in 40-byte HTTP chunks: what the contract tests decode by hand must come out
the same as outcomes, token counts and usage in a RequestRecord."""

import pytest

from loadkit import types as t
from loadkit.client import timer
from loadkit.client.sse import SSEDecoder
from loadkit.engines.base import AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from tests.helpers.stubserver import Answer, stub_server
from tests.helpers.wire import body_bytes

SSE = {"Content-Type": "text/event-stream"}
NDJSON = {"Content-Type": "application/x-ndjson"}
TIMEOUTS = timer.Timeouts(connect_s=2, first_token_s=5, total_s=10)

CASES = [
    # adapter, api, path, fixture, outcome, event tokens, n_out, cached
    (
        VLLMAdapter,
        "chat",
        "/v1/chat/completions",
        "vllm/chat_continuous_usage_reasoning.sse",
        t.OK,
        [1, 1, 2, 1],
        5,
        8,
    ),
    (VLLMAdapter, "completions", "/v1/completions", "vllm/error_new.sse", t.IN_BAND_ERROR, [1], None, None),
    (SGLangAdapter, "native", "/generate", "sglang/native_generate.sse", t.OK, [1, 2, 1], 4, 4),
    (SGLangAdapter, "native", "/generate", "sglang/native_abort.sse", t.IN_BAND_ERROR, [], None, None),
    (SGLangAdapter, "chat", "/v1/chat/completions", "sglang/chat.sse", t.OK, [1, 1], 2, 16),
    (TGIAdapter, "native", "/generate_stream", "tgi/generate_stream.sse", t.OK, [1, 1, 1, 1], 4, None),
    (TGIAdapter, "native", "/generate_stream", "tgi/error.sse", t.IN_BAND_ERROR, [1], None, None),
    (
        LlamaCppAdapter,
        "native",
        "/completion",
        "llamacpp/native_completion.txt",
        t.OK,
        [1] * 6 + [8, 1, 1],
        16,
        26,
    ),
    (LlamaCppAdapter, "completions", "/v1/completions", "llamacpp/completions.txt", t.OK, [1] * 8, 16, 0),
    (OllamaAdapter, "native", "/api/generate", "ollama/generate.ndjson", t.OK, [1, 1, 1], 3, None),
    (OllamaAdapter, "chat", "/api/chat", "ollama/chat_thinking.ndjson", t.OK, [1, 1, 1], 3, None),
    (OllamaAdapter, "native", "/api/generate", "ollama/error.ndjson", t.IN_BAND_ERROR, [1], None, None),
]


def run(adapter, path, body, headers):
    with stub_server({("POST", path): Answer(body, headers=headers, chunked=True)}) as (url, server):
        record = timer.run_request(
            adapter, url, t.GenerationRequest(prompt="hi", max_tokens=16), timeouts=TIMEOUTS
        )
    return record, server.seen


@pytest.mark.parametrize(
    ("cls", "api", "path", "fixture", "outcome", "tokens", "n_out", "cached"),
    CASES,
    ids=[c[3] for c in CASES],
)
def test_replay_through_timer(cls, api, path, fixture, outcome, tokens, n_out, cached):
    adapter = cls(AdapterOptions(model="m", api=api))
    headers = NDJSON if adapter.framing == "ndjson" else SSE
    record, seen = run(adapter, path, body_bytes(fixture), headers)
    assert record.outcome == outcome, record.error
    assert record.event_tokens == tokens
    assert seen[0][2]["Accept"] == adapter.accept
    if n_out is not None:
        assert (record.n_out, record.n_out_source) == (n_out, "usage")
    assert record.cached_tokens == cached


def test_malformed_event_shows_in_outcome():
    body = b'data: {"text": "a", "meta_info": {"completion_tokens": 1}}\n\ndata: {"what": 1}\n\n'
    record, _ = run(SGLangAdapter(AdapterOptions(api="native")), "/generate", body, SSE)
    assert record.outcome == t.MALFORMED_STREAM and record.event_tokens == [1]


def test_triton_close_is_its_normal_end():
    adapter = TensorRTLLMAdapter(AdapterOptions(api="triton"))
    record, _ = run(
        adapter,
        "/v2/models/ensemble/generate_stream",
        body_bytes("tensorrt-llm/triton_generate_stream.sse"),
        SSE,
    )
    assert (record.outcome, record.end) == (t.OK, "close")
    assert record.event_tokens == [1, 1, 1] and record.text == " Machine learning is"


@pytest.mark.xfail(
    not SSEDecoder().feed(b'error: {"message": "x"}\n\n'),
    strict=True,
    reason="loadkit/client/sse.py drops the SSE `error:` field llama-server uses for "
    "stream errors, so the [DONE] after it reads as ok (lead: dispatch it as event 'error')",
)
def test_llamacpp_error_field_is_in_band_error():
    record, _ = run(
        LlamaCppAdapter(AdapterOptions(api="completions")),
        "/v1/completions",
        body_bytes("llamacpp/error_event.sse"),
        SSE,
    )
    assert record.outcome == t.IN_BAND_ERROR
