"""Every built-in adapter, every api: a message it cannot interpret raises MalformedEvent
(-> malformed_stream in the outcome counts), never a silent None or a crash of another type."""

import pytest

from loadkit import types as t
from loadkit.engines.base import AdapterOptions
from loadkit.engines.builtin import builtin_adapters

CASES = [(cls, api) for cls in builtin_adapters() for api in cls.apis]
GARBAGE = ["not json", "[1, 2]", '"text"', "{}", '{"unexpected": true}', '{"choices": "x"}']


@pytest.mark.parametrize(("cls", "api"), CASES, ids=[f"{c.name}-{a}" for c, a in CASES])
@pytest.mark.parametrize("data", GARBAGE)
def test_uninterpretable_message_is_malformed(cls, api, data):
    parser = cls(AdapterOptions(api=api)).new_parser()
    with pytest.raises(t.MalformedEvent):
        parser.parse(data, "message")


@pytest.mark.parametrize(("cls", "api"), CASES, ids=[f"{c.name}-{a}" for c, a in CASES])
def test_truncated_json_is_malformed(cls, api):
    with pytest.raises(t.MalformedEvent):
        cls(AdapterOptions(api=api)).new_parser().parse('{"choices": [{"delta": {"content": "a"', "message")


def test_every_builtin_registered_with_distinct_name():
    names = [cls.name for cls in builtin_adapters()]
    assert sorted(names) == ["llamacpp", "ollama", "openai", "sglang", "tensorrt-llm", "tgi", "vllm"]
