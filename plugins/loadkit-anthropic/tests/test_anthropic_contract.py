import orjson
import pytest
from anthropic_helpers import stream_body
from loadkit_anthropic import AnthropicAdapter

from loadkit import AdapterOptions, GenerationRequest, MalformedEvent
from loadkit.sse import SSEDecoder


def decode(body: bytes, chunk: int = 1 << 20):
    parser, decoder, events = AnthropicAdapter().new_parser(), SSEDecoder(), []
    for i in range(0, len(body), chunk):
        for msg in decoder.feed(body[i : i + chunk]):
            ev = parser.parse(msg.data, msg.event)
            if ev is not None:
                events.append(ev)
    return events


def test_request_shape_and_key_header():
    a = AnthropicAdapter(AdapterOptions(model="claude-x", api_key="sk-secret"))
    req = a.build_request(GenerationRequest(messages=[{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": "Hi"}], max_tokens=50))
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-secret" and "Authorization" not in req.headers
    assert req.headers["anthropic-version"] == "2023-06-01"
    body = orjson.loads(req.body)
    assert body == {"model": "claude-x", "max_tokens": 50, "stream": True, "system": "Be brief.",
                    "messages": [{"role": "user", "content": "Hi"}]}
    assert "sk-secret" not in repr(a.options)


def test_version_header_comes_from_the_run_option():
    assert AnthropicAdapter().base_headers()["anthropic-version"] == "2023-06-01"  # no run: the default
    a = AnthropicAdapter(AdapterOptions(run_options={"anthropic_version": "2099-01-01"}))
    assert a.build_request(GenerationRequest(prompt="Hi")).headers["anthropic-version"] == "2099-01-01"


@pytest.mark.parametrize("chunk", [1 << 20, 13])
def test_docs_example_stream(chunk):
    events = decode(stream_body("messages_stream.sse"), chunk)
    tokens = [e for e in events if e.tokens]
    assert [e.text for e in tokens] == ["Hello", "!"]
    usage = [e.usage for e in events if e.usage][-1]
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (125, 15, 100)
    assert events[-1].done and [e.finish_reason for e in events if e.finish_reason] == ["end_turn"]


def test_thinking_counts_as_reasoning():
    events = decode(stream_body("thinking_stream.sse"))
    tokens = [e for e in events if e.tokens]
    assert tokens[0].reasoning_text.startswith("I need") and tokens[1].text == "The GCD is 21."
    assert len(tokens) == 2  # the signature delta carries no tokens


def test_error_event():
    events = decode(stream_body("error_stream.sse"))
    assert events[-1].error == "overloaded_error: Overloaded"


@pytest.mark.parametrize("data", ["nope", '{"no": "type"}', '{"type": "brand_new_event"}',
                                  '{"type": "content_block_delta", "delta": {"type": "citations_delta"}}',
                                  '{"type": "message_start"}'])
def test_unknown_or_broken_events_are_malformed(data):
    with pytest.raises(MalformedEvent):
        AnthropicAdapter().new_parser().parse(data, "x")
