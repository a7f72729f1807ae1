import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from tests.helpers.wire import body_bytes, replay


def adapter(api: str = "native") -> LlamaCppAdapter:
    return LlamaCppAdapter(AdapterOptions(model="tiny", api=api))


def test_native_request_shape():
    req = adapter().build_request(t.GenerationRequest(prompt="p", max_tokens=16))
    assert req.path == "/completion"
    assert orjson.loads(req.body) == {
        "prompt": "p",
        "n_predict": 16,
        "stream": True,
        "cache_prompt": True,
        "ignore_eos": True,
    }


@pytest.mark.parametrize("chunk", [None, 11])
def test_real_native_capture(chunk):
    r = replay(adapter(), body_bytes("llamacpp/native_completion.txt"), chunk)
    assert r.outcome == t.OK
    # The capture keeps 9 of 16 token events: the count's growth puts the 7 omitted tokens on
    # the first event after the gap, so the events add up to the server's usage.
    assert r.tokens == [1] * 6 + [8, 1, 1]
    assert sum(r.tokens) == 16
    assert r.usage == t.Usage(prompt_tokens=27, completion_tokens=16, cached_tokens=26)
    last = r.events[-1]
    assert last.finish_reason == "length" and last.server_timings is not None
    assert last.server_timings["predicted_n"] == 16


def test_native_event_with_several_tokens_counts_them():
    body = (
        b'data: {"content":"ab","tokens":[1,2,3],"stop":false}\n\n'
        b'data: {"content":"","tokens":[],"stop":true,"stop_type":"eos","tokens_predicted":3}\n\n'
    )
    r = replay(adapter(), body)
    assert r.tokens == [3] and r.events[-1].finish_reason == "stop"


def test_real_completions_capture():
    r = replay(adapter("completions"), body_bytes("llamacpp/completions.txt"))
    assert r.outcome == t.OK and r.tokens == [1] * 8
    assert r.usage == t.Usage(prompt_tokens=27, completion_tokens=16, cached_tokens=0)
    assert any(e.server_timings for e in r.events)


def test_real_chat_capture_role_chunk_is_not_a_token():
    r = replay(adapter("chat"), body_bytes("llamacpp/chat_completions.txt"))
    assert r.outcome == t.OK and r.tokens == [1] * 6  # 5 first + 1 last kept in the capture
    assert r.usage is not None and r.usage.cached_tokens == 7


@pytest.mark.parametrize("api", ["native", "completions"])
def test_error_event_is_in_band_error(api):
    a = adapter(api)
    r = a.new_parser().parse(
        '{"code":500,"message":"failed to decode the batch","type":"server_error"}', "error"
    )
    assert r is not None and r.error == "failed to decode the batch"


def test_tokenize_and_props():
    a = adapter()
    req = a.tokenize_request("hi")
    assert req is not None and orjson.loads(req.body) == {"content": "hi", "add_special": False}
    assert a.parse_tokenize({"tokens": [1, 2]}) == 2
    info = a.describe_server(
        {
            "/props": {
                "build_info": "b6000-abc",
                "model_path": "/m/tiny.gguf",
                "total_slots": 4,
                "default_generation_settings": {"n_ctx": 2048},
            }
        }
    )
    assert info == {"engine_version": "b6000-abc", "model": "/m/tiny.gguf", "max_model_len": 2048, "slots": 4}
