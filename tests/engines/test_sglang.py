import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.sglang import SGLangAdapter
from tests.helpers.wire import body_bytes, replay


def adapter(api: str) -> SGLangAdapter:
    return SGLangAdapter(AdapterOptions(model="m", api=api))


def test_native_request_shape():
    req = adapter("native").build_request(
        t.GenerationRequest(messages=[{"role": "user", "content": "q"}], max_tokens=9)
    )
    body = orjson.loads(req.body)
    assert req.path == "/generate" and body["stream"] is True
    assert body["sampling_params"] == {"max_new_tokens": 9, "ignore_eos": True}
    assert "q" in body["text"]


@pytest.mark.parametrize("chunk", [None, 5])
def test_native_cumulative_text_and_meta_info_counts(chunk):
    r = replay(adapter("native"), body_bytes("sglang/native_generate.sse"), chunk)
    assert r.outcome == t.OK
    assert r.tokens == [1, 2, 1]  # completion_tokens deltas: 1 -> 3 -> 4
    assert r.text == " Paris is the capital"
    assert r.usage == t.Usage(prompt_tokens=7, completion_tokens=4, cached_tokens=4)
    assert r.events[-2].finish_reason == "length"


def test_incremental_streaming_output_text_is_kept_as_delta():
    body = (
        b"".join(
            b'data: {"text": "%s", "meta_info": {"completion_tokens": %d, "finish_reason": null}}\n\n'
            % (s, i)
            for i, s in enumerate([b"ab", b"c", b"ab"], 1)
        )
        + b"data: [DONE]\n\n"
    )
    r = replay(adapter("native"), body)
    assert r.text == "abcab" and r.tokens == [1, 1, 1]


@pytest.mark.parametrize("name", ["sglang/native_abort.sse", "sglang/native_error.sse"])
def test_native_abort_and_error_are_in_band_errors(name):
    r = replay(adapter("native"), body_bytes(name))
    assert r.outcome == t.IN_BAND_ERROR and r.error


def test_native_count_going_backwards_is_malformed():
    body = (
        b'data: {"text": "a", "meta_info": {"completion_tokens": 3}}\n\n'
        b'data: {"text": "ab", "meta_info": {"completion_tokens": 2}}\n\n'
    )
    assert replay(adapter("native"), body).outcome == t.MALFORMED_STREAM


def test_openai_chat_reasoning_and_cached_tokens():
    r = replay(adapter("chat"), body_bytes("sglang/chat.sse"))
    assert r.outcome == t.OK and r.tokens == [1, 1]
    assert r.reasoning == "Hmm" and r.text == "Hi"
    assert r.usage is not None and r.usage.cached_tokens == 16


def test_describe_server():
    info = adapter("chat").describe_server(
        {"/get_model_info": {"model_path": "Qwen/Qwen2.5-7B"}, "/get_server_info": {"version": "0.5.4"}}
    )
    assert info == {"model": "Qwen/Qwen2.5-7B", "engine_version": "0.5.4"}
