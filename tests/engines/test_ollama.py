import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.ollama import OllamaAdapter
from tests.helpers.wire import body_bytes, replay


def adapter(api: str = "native") -> OllamaAdapter:
    return OllamaAdapter(AdapterOptions(model="llama3.2", api=api))


def test_framing_and_request_shape():
    a = adapter("chat")
    assert a.framing == "ndjson" and a.accept == "application/x-ndjson"
    req = a.build_request(t.GenerationRequest(prompt="hi", max_tokens=4))
    assert req.path == "/api/chat"
    body = orjson.loads(req.body)
    assert body["options"] == {"num_predict": 4} and body["messages"] == [{"role": "user", "content": "hi"}]
    assert "ignore_eos" not in body


@pytest.mark.parametrize("chunk", [None, 9])
def test_generate(chunk):
    r = replay(adapter(), body_bytes("ollama/generate.ndjson"), chunk)
    assert r.outcome == t.OK and r.tokens == [1, 1, 1] and r.text == "The sky is"
    assert r.usage == t.Usage(prompt_tokens=26, completion_tokens=3)
    last = r.events[-1]
    assert last.finish_reason == "length" and last.server_timings is not None
    assert last.server_timings["eval_duration"] == 4232710000


def test_chat_thinking_is_reasoning_and_counts_as_first_token():
    r = replay(adapter("chat"), body_bytes("ollama/chat_thinking.ndjson"))
    assert r.outcome == t.OK and r.tokens == [1, 1, 1]
    assert r.token_events[0].reasoning_text == "Okay" and r.text == "Hello!"


def test_last_line_without_newline_still_ends_the_stream():
    body = body_bytes("ollama/generate.ndjson").rstrip(b"\n")
    assert replay(adapter(), body).outcome == t.OK


def test_error_line():
    r = replay(adapter(), body_bytes("ollama/error.ndjson"))
    assert r.outcome == t.IN_BAND_ERROR and "unexpected EOF" in (r.error or "")


def test_no_metrics_endpoint():
    assert OllamaAdapter.metrics_path is None
    assert adapter().describe_server(
        {"/api/version": {"version": "0.12.3"}, "/api/tags": {"models": [{"name": "qwen3:latest"}]}}
    ) == {"engine_version": "0.12.3", "model": "llama3.2"}
