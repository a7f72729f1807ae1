"""The request side and the run option; the stream side is the contract suite (test_anthropic_suite.py)."""

import orjson
import pytest
from loadkit_anthropic import AnthropicAdapter

from loadkit import AdapterOptions, GenerationRequest, MalformedEvent


def test_request_shape_and_key_header():
    a = AnthropicAdapter(AdapterOptions(model="claude-x", api_key="sk-secret"))
    req = a.build_request(
        GenerationRequest(
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            max_tokens=50,
        )
    )
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-secret" and "Authorization" not in req.headers
    assert req.headers["anthropic-version"] == "2023-06-01"
    body = orjson.loads(req.body)
    assert body == {
        "model": "claude-x",
        "max_tokens": 50,
        "stream": True,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
    }
    assert "sk-secret" not in repr(a.options)


def test_version_header_comes_from_the_run_option():
    assert AnthropicAdapter().base_headers()["anthropic-version"] == "2023-06-01"  # no run: the default
    a = AnthropicAdapter(AdapterOptions(run_options={"anthropic_version": "2099-01-01"}))
    assert a.build_request(GenerationRequest(prompt="Hi")).headers["anthropic-version"] == "2099-01-01"


@pytest.mark.parametrize(
    "data",
    [
        "nope",
        '{"no": "type"}',
        '{"type": "brand_new_event"}',
        '{"type": "content_block_delta", "delta": {"type": "citations_delta"}}',
        '{"type": "message_start"}',
    ],
)
def test_unknown_or_broken_events_are_malformed(data):
    with pytest.raises(MalformedEvent):
        AnthropicAdapter().new_parser().parse(data, "x")
