import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.tgi import TGIAdapter
from tests.helpers.wire import body_bytes, replay


def test_native_request_shape_has_no_ignore_eos():
    req = TGIAdapter().build_request(t.GenerationRequest(prompt="p", max_tokens=5))
    body = orjson.loads(req.body)
    assert req.path == "/generate_stream"
    assert body["inputs"] == "p" and body["parameters"] == {"max_new_tokens": 5, "details": True}


@pytest.mark.parametrize("chunk", [None, 3])
def test_one_token_per_event_and_details_end_the_stream(chunk):
    r = replay(TGIAdapter(), body_bytes("tgi/generate_stream.sse"), chunk)
    assert r.outcome == t.OK
    assert r.tokens == [1, 1, 1, 1]  # the EOS special token counts, adds no text
    assert r.text == " The cat sat"
    assert r.usage == t.Usage(prompt_tokens=6, completion_tokens=4)
    assert r.events[-1].finish_reason == "eos_token"


def test_stream_without_details_is_incomplete():
    body = body_bytes("tgi/generate_stream.sse").split(b"\n\n")[0] + b"\n\n"
    assert replay(TGIAdapter(), body).outcome == t.INCOMPLETE


def test_error_event():
    r = replay(TGIAdapter(), body_bytes("tgi/error.sse"))
    assert r.outcome == t.IN_BAND_ERROR and "CUDA out of memory" in (r.error or "")


def test_chat_api_uses_openai_route():
    a = TGIAdapter(AdapterOptions(api="chat"))
    assert a.build_request(t.GenerationRequest(prompt="p")).path == "/v1/chat/completions"


def test_tokenize_and_info():
    a = TGIAdapter()
    req = a.tokenize_request("abc")
    assert req is not None and req.path == "/tokenize" and orjson.loads(req.body) == {"inputs": "abc"}
    assert a.parse_tokenize([{"id": 1, "text": "a", "start": 0, "stop": 1}, {"id": 2}]) == 2
    info = a.describe_server(
        {"/info": {"model_id": "bigscience/bloom-560m", "version": "3.0.1", "max_total_tokens": 2048}}
    )
    assert info == {"model": "bigscience/bloom-560m", "engine_version": "3.0.1", "max_model_len": 2048}
