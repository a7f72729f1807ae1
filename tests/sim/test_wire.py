"""Each wire protocol's exact shape, compared with recorded examples in tests/sim/fixtures/.

"Shape" = keys in order, value types, and the SSE/NDJSON framing; values (ids, text, times)
differ by nature. llama.cpp fixtures are real captures.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadkit.sim.testing import SimHandle, sim_thread
from tests.sim.rawclient import RawResponse, request

FIX = Path(__file__).parent / "fixtures"


def shape(obj: Any) -> Any:
    """Keys in order and value types; a list's shape is that of its first element."""
    if isinstance(obj, dict):
        return [(k, shape(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [shape(obj[0])] if obj else []
    return "null" if obj is None else type(obj).__name__


def fixture_events(name: str) -> list[Any]:
    """JSON data of a fixture's SSE events (headers and comments skipped; [DONE] kept)."""
    out: list[Any] = []
    for line in (FIX / name).read_text().splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimHandle]]:
    from contextlib import ExitStack

    with ExitStack() as stack:
        yield {
            fam: stack.enter_context(sim_thread(fam, decode_base_ms=1.0))
            for fam in ("openai", "sglang", "tgi", "triton", "llamacpp", "ollama")
        }


CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "Tell me a story"}],
    "max_tokens": 4,
    "stream": True,
    "ignore_eos": True,
    "stream_options": {"include_usage": True},
}
COMPLETION = {
    "model": "m",
    "prompt": "The capital of France is",
    "max_tokens": 4,
    "stream": True,
    "ignore_eos": True,
    "stream_options": {"include_usage": True},
}


def data_lines(resp: RawResponse) -> list[Any]:
    return [d if d == "[DONE]" else json.loads(d) for d in resp.sse_data()]


def test_vllm_chat_stream_matches_fixture(sims: dict[str, SimHandle]) -> None:
    resp = request(sims["openai"].port, "POST", "/v1/chat/completions", CHAT)
    got, want = data_lines(resp), fixture_events("vllm_chat_stream.txt")
    assert resp.status == 200 and resp.complete
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert got[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert shape(got[0]) == shape(want[0]) and shape(got[1]) == shape(want[1])
    assert got[-3]["choices"][0]["finish_reason"] == "length"  # on the last text chunk
    assert shape(got[-2]) == shape(want[-2]) and got[-2]["usage"]["completion_tokens"] == 4
    assert got[-1] == "[DONE]" and len(got) == 1 + 4 + 2


def test_vllm_completions_stream_matches_fixture(sims: dict[str, SimHandle]) -> None:
    resp = request(sims["openai"].port, "POST", "/v1/completions", COMPLETION)
    got, want = data_lines(resp), fixture_events("vllm_completions_stream.txt")
    assert shape(got[0]) == shape(want[0]) and shape(got[-2]) == shape(want[-2])
    assert [e["choices"][0]["finish_reason"] for e in got[:4]] == [None, None, None, "length"]
    assert got[-1] == "[DONE]"


def test_vllm_continuous_usage_stats(sims: dict[str, SimHandle]) -> None:
    body = {**CHAT, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    got = data_lines(request(sims["openai"].port, "POST", "/v1/chat/completions", body))
    counts = [e["usage"]["completion_tokens"] for e in got[:-1]]
    assert counts == [0, 1, 2, 3, 4, 4]  # role chunk, 4 tokens, final usage chunk


def test_usage_chunk_only_when_asked(sims: dict[str, SimHandle]) -> None:
    body = {**COMPLETION, "stream_options": None}
    got = data_lines(request(sims["openai"].port, "POST", "/v1/completions", body))
    assert not any("usage" in e for e in got if e != "[DONE]") and got[-1] == "[DONE]"


def test_llamacpp_chat_matches_real_capture(sims: dict[str, SimHandle]) -> None:
    got = data_lines(request(sims["llamacpp"].port, "POST", "/v1/chat/completions", CHAT))
    want = fixture_events("llamacpp_chat_completions.txt")
    assert shape(got[0]) == shape(want[0])  # role chunk, content null
    assert shape(got[1]) == shape(want[1])
    assert shape(got[-3]) == shape(want[-3])  # finish chunk with empty delta
    assert shape(got[-2]) == shape(want[-2])  # usage + timings, choices []
    assert got[-1] == "[DONE]"


def test_llamacpp_completions_matches_real_capture(sims: dict[str, SimHandle]) -> None:
    resp = request(sims["llamacpp"].port, "POST", "/v1/completions", COMPLETION)
    got, want = data_lines(resp), fixture_events("llamacpp_completions.txt")
    assert resp.headers["server"] == "llama.cpp"
    assert shape(got[0]) == shape(want[0]) and shape(got[-2]) == shape(want[-2])


def test_llamacpp_native_matches_real_capture(sims: dict[str, SimHandle]) -> None:
    body = {"prompt": "The quick brown fox", "n_predict": 4, "stream": True, "ignore_eos": True}
    got = data_lines(request(sims["llamacpp"].port, "POST", "/completion", body))
    want = fixture_events("llamacpp_native_completion.txt")
    assert shape(got[0]) == shape(want[0])
    final_keys = [k for k in want[-1] if k != "generation_settings"]
    assert [k for k in got[-1] if k != "generation_settings"] == final_keys
    assert got[-1]["stop"] is True and got[-1]["tokens_predicted"] == 4 and "[DONE]" not in got


def test_sglang_generate_cumulative_text(sims: dict[str, SimHandle]) -> None:
    body = {
        "text": "The capital of France is",
        "sampling_params": {"max_new_tokens": 3, "ignore_eos": True},
        "stream": True,
    }
    got = data_lines(request(sims["sglang"].port, "POST", "/generate", body))
    want = fixture_events("sglang_generate_stream.txt")
    assert shape(got[0]) == shape(want[0]) and shape(got[-2]) == shape(want[-2])
    assert got[1]["text"].startswith(got[0]["text"]) and got[-1] == "[DONE]"
    assert got[-2]["meta_info"]["finish_reason"] == {"type": "length", "length": 3}


def test_tgi_generate_stream_no_space_after_data(sims: dict[str, SimHandle]) -> None:
    body = {"inputs": "What is Deep Learning?", "parameters": {"max_new_tokens": 3}}
    resp = request(sims["tgi"].port, "POST", "/generate_stream", body)
    assert resp.body.startswith(b'data:{"index":1,')
    got, want = data_lines(resp), fixture_events("tgi_generate_stream.txt")
    assert shape(got[0]) == shape(want[0]) and shape(got[-1]) == shape(want[-1])
    assert got[-1]["generated_text"] == "".join(e["token"]["text"] for e in got)


def test_triton_generate_stream(sims: dict[str, SimHandle]) -> None:
    resp = request(
        sims["triton"].port,
        "POST",
        "/v2/models/ensemble/generate_stream",
        {"text_input": "What is ML?", "max_tokens": 3},
    )
    got, want = data_lines(resp), fixture_events("triton_generate_stream.txt")
    assert len(got) == 3 and all(shape(e) == shape(want[0]) for e in got)


@pytest.mark.parametrize("path, fixture, body", [
    ("/api/generate", "ollama_generate.ndjson", {"model": "m", "prompt": "Why is the sky blue?", "options": {"num_predict": 3}}),
    ("/api/chat", "ollama_chat.ndjson", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                         "options": {"num_predict": 3}}),
])  # fmt: skip
def test_ollama_ndjson(sims: dict[str, SimHandle], path: str, fixture: str, body: dict[str, Any]) -> None:
    resp = request(sims["ollama"].port, "POST", path, body)
    got = resp.ndjson()
    want = [json.loads(line) for line in (FIX / fixture).read_text().splitlines()]
    assert resp.headers["content-type"] == "application/x-ndjson"
    assert shape(got[0]) == shape(want[0]) and shape(got[-1]) == shape(want[-1])
    assert got[-1]["done"] is True and got[-1]["eval_count"] == 3 and got[-1]["done_reason"] == "length"


def test_non_streamed_answers(sims: dict[str, SimHandle]) -> None:
    chat = request(sims["openai"].port, "POST", "/v1/chat/completions", {**CHAT, "stream": False}).json()
    assert chat["object"] == "chat.completion" and chat["usage"]["completion_tokens"] == 4
    gen = request(
        sims["ollama"].port,
        "POST",
        "/api/generate",
        {"prompt": "x", "stream": False, "options": {"num_predict": 2}},
    ).json()
    assert gen["done"] is True and len(gen["response"].split()) == 2


def test_cached_tokens_reported_on_repeat(sims: dict[str, SimHandle]) -> None:
    prompt = "You are a helpful assistant. " * 20
    body = {**COMPLETION, "prompt": prompt}
    first = data_lines(request(sims["openai"].port, "POST", "/v1/completions", body))[-2]["usage"]
    second = data_lines(request(sims["openai"].port, "POST", "/v1/completions", body))[-2]["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    n = second["prompt_tokens"]
    assert second["prompt_tokens_details"]["cached_tokens"] == (n - 1) // 16 * 16 > 0


@pytest.mark.parametrize("fam, path, expect", [
    ("openai", "/v1/models", "data"), ("openai", "/version", "version"), ("llamacpp", "/health", "status"),
    ("tgi", "/info", "model_id"), ("sglang", "/get_model_info", "model_path"), ("ollama", "/api/tags", "models"),
    ("ollama", "/api/version", "version"), ("triton", "/v2", "extensions"),
])  # fmt: skip
def test_info_endpoints(sims: dict[str, SimHandle], fam: str, path: str, expect: str) -> None:
    resp = request(sims[fam].port, "GET", path)
    assert resp.status == 200 and expect in resp.json()


def test_tokenize_endpoints_agree(sims: dict[str, SimHandle]) -> None:
    text = "Hello, world! The 12345 quick brown fox"
    vllm = request(sims["openai"].port, "POST", "/tokenize", {"prompt": text}).json()
    llama = request(sims["llamacpp"].port, "POST", "/tokenize", {"content": text}).json()
    tgi = request(sims["tgi"].port, "POST", "/tokenize", {"inputs": text}).json()
    assert vllm["tokens"] == llama["tokens"] == [t["id"] for t in tgi]
    assert "".join(t["text"] for t in tgi) == text and vllm["count"] == 10


@pytest.mark.parametrize("fam, names", [
    ("openai", ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                "vllm:prefix_cache_hits_total"]),
    ("sglang", ["sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:cache_hit_rate"]),
    ("llamacpp", ["llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:prompt_tokens_cached_total"]),
    ("tgi", ["tgi_batch_current_size", "tgi_queue_size"]),
    ("triton", ["nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics"]),
])  # fmt: skip
def test_metrics_use_engine_names(sims: dict[str, SimHandle], fam: str, names: list[str]) -> None:
    resp = request(sims[fam].port, "GET", "/metrics")
    text = resp.body.decode()
    assert resp.status == 200
    for name in names:
        assert f"# TYPE {name} " in text


def test_ollama_has_no_metrics(sims: dict[str, SimHandle]) -> None:
    assert request(sims["ollama"].port, "GET", "/metrics").status == 404


@pytest.mark.parametrize("fam, path, body, status, check", [
    ("openai", "/v1/chat/completions", b"{not json", 400, lambda j: j["error"]["code"] == 400),
    ("openai", "/v1/completions", b'{"prompt": 5}', 400, lambda j: "prompt" in j["error"]["message"]),
    ("tgi", "/generate_stream", b'{"parameters": {}}', 422, lambda j: j["error_type"] == "validation"),
    ("llamacpp", "/completion", b"[]", 400, lambda j: j["error"]["type"] == "invalid_request_error"),
    ("ollama", "/api/generate", b'{"model": "m"}', 400, lambda j: "prompt" in j["error"]),
    ("sglang", "/generate", b"{}", 400, lambda j: "message" in j["error"]),
    ("triton", "/v2/models/ensemble/generate_stream", b"{}", 400, lambda j: "text_input" in j["error"]),
])  # fmt: skip
def test_malformed_bodies_get_the_engines_error_shape(
    sims: dict[str, SimHandle], fam: str, path: str, body: bytes, status: int, check: Any
) -> None:
    resp = request(sims[fam].port, "POST", path, raw_body=body)
    assert resp.status == status and check(resp.json())


@pytest.mark.parametrize(
    "fam, status, key",
    [("openai", 400, "error"), ("tgi", 422, "error"), ("llamacpp", 400, "error"), ("sglang", 400, "error")],
)
def test_over_long_prompt_is_refused(sims: dict[str, SimHandle], fam: str, status: int, key: str) -> None:
    body = {**COMPLETION, "prompt": "word " * 9000}
    path = "/v1/completions"
    resp = request(sims[fam].port, "POST", path, body)
    assert resp.status == status and key in resp.json()


def test_keep_alive_serves_several_requests_on_one_connection(sims: dict[str, SimHandle]) -> None:
    import socket

    port = sims["openai"].port
    body = json.dumps({**COMPLETION, "stream": False}).encode()
    req = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(req + req)  # pipelined
        data = b""
        while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}"):
            data += sock.recv(65536)
    assert data.count(b'"object":"text_completion"') == 2


def test_expect_100_continue(sims: dict[str, SimHandle]) -> None:
    import socket

    body = json.dumps({**COMPLETION, "stream": False}).encode()
    head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", sims["openai"].port), timeout=5) as sock:
        sock.sendall(head.encode())
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        data = b""
        while not data.endswith(b"}"):
            data += sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 200 OK") and b'"completion_tokens":4' in data
