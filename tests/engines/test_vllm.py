import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.vllm import VLLMAdapter
from tests.helpers.wire import body_bytes, replay


def adapter(api: str = "chat") -> VLLMAdapter:
    return VLLMAdapter(AdapterOptions(model="m", api=api))


def test_request_asks_for_exact_output_and_running_usage():
    req = adapter().build_request(t.GenerationRequest(prompt="hi", max_tokens=64))
    body = orjson.loads(req.body)
    assert req.path == "/v1/chat/completions"
    assert body["ignore_eos"] is True and body["min_tokens"] == 64 and body["max_tokens"] == 64
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def test_no_exact_fields_when_not_asked():
    body = orjson.loads(
        adapter("completions").build_request(t.GenerationRequest(prompt="x", exact_output=False)).body
    )
    assert "ignore_eos" not in body and "min_tokens" not in body and body["prompt"] == "x"


@pytest.mark.parametrize("chunk", [None, 7])
def test_chat_running_usage_gives_exact_tokens_per_event(chunk):
    r = replay(adapter(), body_bytes("vllm/chat_continuous_usage_reasoning.sse"), chunk)
    assert r.outcome == t.OK
    assert r.tokens == [1, 1, 2, 1]  # the role chunk is not a token; the 4th chunk holds two
    assert r.reasoning == "Let me think" and r.text == "Héllo world"
    assert r.usage == t.Usage(prompt_tokens=12, completion_tokens=5, cached_tokens=8)


def test_completions_without_running_usage_count_one_per_chunk():
    r = replay(adapter("completions"), body_bytes("vllm/completions.sse"))
    assert r.outcome == t.OK and r.tokens == [1, 1, 1]
    assert r.usage is not None and r.usage.completion_tokens == 3 and r.usage.cached_tokens == 0


@pytest.mark.parametrize("name", ["vllm/error_new.sse", "vllm/error_old.sse"])
def test_in_band_errors_both_shapes(name):
    r = replay(adapter("completions"), body_bytes(name))
    assert r.outcome == t.IN_BAND_ERROR and r.error


def test_tokenize_and_describe():
    a = adapter()
    req = a.tokenize_request("hello")
    assert (
        req is not None
        and req.path == "/tokenize"
        and orjson.loads(req.body) == {"model": "m", "prompt": "hello", "add_special_tokens": False}
    )
    assert a.parse_tokenize({"count": 3, "max_model_len": 4096, "tokens": [1, 2, 3]}) == 3
    info = a.describe_server(
        {
            "/version": {"version": "0.11.0"},
            "/v1/models": {"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 4096}]},
        }
    )
    assert info == {"model": "m", "engine_version": "0.11.0", "max_model_len": 4096}
