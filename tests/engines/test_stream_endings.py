"""How each adapter's streams may end, through the real stream timer over loopback.

Recorded streams are served whole, without their end marker, and cut before their last
message. OpenAI-chunk routes end normally on a clean close after a chunk with a finish_reason
(or after the usage-only chunk): ok, ``end`` "close". Native routes whose last message is the
end marker itself (TGI, llama.cpp /completion, Ollama) stay ``incomplete`` without it; SGLang's
native stream has a finish_reason before its ``[DONE]``; Triton ends by closing. A close that
is not clean (no terminating chunk) is ``disconnected`` whatever came before.
"""

from __future__ import annotations

import pytest

from loadkit import types as t
from loadkit.client.timer import run_request
from loadkit.engines.base import AdapterOptions, EngineAdapter
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.openai import OpenAIAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from tests.helpers.scripted_server import END_CHUNK, Script, ScriptedServer, chunk
from tests.helpers.wire import body_bytes

REQ = t.GenerationRequest(prompt="hi", max_tokens=16)
OK, INCOMPLETE = t.OK, t.INCOMPLETE


def make(cls: type[EngineAdapter], api: str) -> EngineAdapter:
    return cls(AdapterOptions(model="m", api=api))


# (adapter, api, fixture, outcome without the end marker, outcome cut before the last message)
CASES = [
    (
        OpenAIAdapter,
        "chat",
        "vllm/chat_continuous_usage_reasoning.sse",
        OK,
        OK,
    ),  # usage-only chunk cut: finish left
    (VLLMAdapter, "chat", "vllm/chat_continuous_usage_reasoning.sse", OK, OK),
    (VLLMAdapter, "completions", "vllm/completions.sse", OK, OK),
    (SGLangAdapter, "chat", "sglang/chat.sse", OK, OK),
    (SGLangAdapter, "native", "sglang/native_generate.sse", OK, INCOMPLETE),
    (TensorRTLLMAdapter, "chat", "vllm/chat_continuous_usage_reasoning.sse", OK, OK),
    (TensorRTLLMAdapter, "triton", "tensorrt-llm/triton_generate_stream.sse", OK, OK),
    (LlamaCppAdapter, "chat", "llamacpp/chat_completions.txt", OK, OK),
    (
        LlamaCppAdapter,
        "completions",
        "llamacpp/completions.txt",
        OK,
        INCOMPLETE,
    ),  # finish and usage in one chunk
    (LlamaCppAdapter, "native", "llamacpp/native_completion.txt", INCOMPLETE, INCOMPLETE),
    (TGIAdapter, "native", "tgi/generate_stream.sse", INCOMPLETE, INCOMPLETE),
    (OllamaAdapter, "native", "ollama/generate.ndjson", INCOMPLETE, INCOMPLETE),
]
IDS = [f"{cls.name}-{api}" for cls, api, *_ in CASES]


def messages(adapter: EngineAdapter, body: bytes) -> list[bytes]:
    sep = b"\n\n" if adapter.framing == "sse" else b"\n"
    return [m + sep for m in body.split(sep) if m.strip()]


def is_marker(adapter: EngineAdapter, message: bytes) -> bool:
    """The message is the protocol's end (the parser says ``done``)."""
    data = message.strip().decode()
    if adapter.framing == "sse":
        data = data.removeprefix("data:").strip()
    event = adapter.new_parser().parse(data, None)
    return event is not None and event.done


def serve(adapter: EngineAdapter, parts: list[bytes], clean: bool = True) -> t.RequestRecord:  # type: ignore[name-defined]
    kind = b"text/event-stream" if adapter.framing == "sse" else b"application/x-ndjson"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    writes = [(0.0, chunk(p)) for p in parts] + ([(0.0, END_CHUNK)] if clean else [])
    with ScriptedServer(lambda _req: Script(head=head, writes=writes)) as srv:
        return run_request(adapter, srv.url, REQ)


@pytest.mark.parametrize(("cls", "api", "fixture", "without_marker", "cut"), CASES, ids=IDS)
def test_whole_stream_ends_by_its_marker(cls, api, fixture, without_marker, cut):
    adapter = make(cls, api)
    rec = serve(adapter, messages(adapter, body_bytes(fixture)))
    assert rec.outcome == OK, rec.error
    assert rec.end == ("close" if api == "triton" else "marker")


@pytest.mark.parametrize(("cls", "api", "fixture", "without_marker", "cut"), CASES, ids=IDS)
def test_clean_close_without_the_marker(cls, api, fixture, without_marker, cut):
    adapter = make(cls, api)
    parts = [m for m in messages(adapter, body_bytes(fixture)) if not is_marker(adapter, m)]
    rec = serve(adapter, parts)
    assert rec.outcome == without_marker, rec.error
    assert rec.end == ("close" if without_marker == OK else None)
    if without_marker == OK:
        assert rec.event_t_ns and rec.t_end_ns is not None  # latency figures exist
    else:
        assert "no end marker, no finish_reason" in (rec.error or "")


@pytest.mark.parametrize(("cls", "api", "fixture", "without_marker", "cut"), CASES, ids=IDS)
def test_clean_close_before_the_last_message(cls, api, fixture, without_marker, cut):
    adapter = make(cls, api)
    parts = [m for m in messages(adapter, body_bytes(fixture)) if not is_marker(adapter, m)][:-1]
    assert serve(adapter, parts).outcome == cut


@pytest.mark.parametrize(("cls", "api", "fixture", "without_marker", "cut"), CASES, ids=IDS)
def test_unclean_close_is_disconnected_even_after_a_finish_reason(cls, api, fixture, without_marker, cut):
    adapter = make(cls, api)
    parts = [m for m in messages(adapter, body_bytes(fixture)) if not is_marker(adapter, m)]
    assert serve(adapter, parts, clean=False).outcome == t.DISCONNECTED


def test_continuous_usage_alone_is_no_end():
    """vLLM puts usage on every chunk: a stream cut cleanly before its finish chunk is not ok."""
    adapter = make(VLLMAdapter, "chat")
    parts = messages(adapter, body_bytes("vllm/chat_continuous_usage_reasoning.sse"))[:4]
    rec = serve(adapter, parts)
    assert rec.outcome == INCOMPLETE and rec.n_out == 4 and rec.end is None


def test_usage_only_chunk_without_any_finish_reason_ends_the_stream():
    adapter = make(OpenAIAdapter, "chat")
    body = (b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n'
            b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n')  # fmt: skip
    rec = serve(adapter, messages(adapter, body))
    assert rec.outcome == OK and rec.end == "close" and rec.n_out_source == "usage"
    assert rec.finish_reason is None


def test_anthropic_plugin_ends_on_a_clean_close_after_its_stop_reason():
    anthropic = pytest.importorskip("loadkit_anthropic")
    from pathlib import Path

    fixture = Path(anthropic.__file__).resolve().parents[2] / "tests" / "fixtures" / "messages_stream.sse"
    if not fixture.exists():
        pytest.skip("the plugin's test fixtures are not installed next to it")
    adapter = anthropic.AnthropicAdapter(AdapterOptions(model="m"))
    events = [
        e + b"\n\n" for e in fixture.read_bytes().split(b"\n\n") if e.strip() and not e.startswith(b"#")
    ]
    stop = [e for e in events if b"message_stop" not in e]
    assert len(stop) == len(events) - 1
    rec = serve(adapter, stop)
    assert (rec.outcome, rec.end) == (OK, "close") and rec.finish_reason is not None
    cut = [e for e in stop if b"message_delta" not in e]
    assert serve(adapter, cut).outcome == INCOMPLETE
