"""The contract suite fails adapters that break the contract (a suite that cannot fail is no test)."""

import pytest

from loadkit import types as t
from loadkit.engines.base import StreamParser
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.testing.adapters import AdapterContract, StreamCase
from tests.engines.wire import FIXTURES

CHAT = StreamCase("chat_continuous_usage_reasoning.sse", tokens=[1, 1, 2, 1], n_out=5, api="chat")


class Lenient(VLLMAdapter):
    """Skips what it does not understand instead of failing loudly."""

    def new_parser(self) -> StreamParser:
        inner = super().new_parser()

        class P(StreamParser):
            def parse(self, data, event=None):
                try:
                    return inner.parse(data, event)
                except t.MalformedEvent:
                    return None

        return P()


class StatefulAcrossReads(OllamaAdapter):
    """Treats each read as a whole message: wrong as soon as a line is split."""

    framing = "sse"


def suite(adapter, fixtures, case):
    cls = type("Suite", (AdapterContract,), {"adapter": adapter, "fixtures": fixtures, "cases": [case]})
    return cls()


def test_lenient_parser_fails_garbage_and_bad_json():
    s = suite(Lenient, FIXTURES / "vllm", CHAT)
    with pytest.raises(pytest.fail.Exception):
        s.test_garbage_is_malformed("chat", "not json")
    with pytest.raises(AssertionError, match="gave ok"):
        s.test_invalid_json_is_malformed(CHAT)


def test_wrong_declaration_fails_and_right_one_passes():
    wrong = StreamCase(CHAT.fixture, tokens=[1, 1, 1, 1, 1], api="chat")
    with pytest.raises(AssertionError):
        suite(VLLMAdapter, FIXTURES / "vllm", wrong).test_decodes_as_declared(wrong)
    with pytest.raises(AssertionError):
        suite(VLLMAdapter, FIXTURES / "vllm", wrong).test_through_the_stream_timer(wrong)
    suite(VLLMAdapter, FIXTURES / "vllm", CHAT).test_through_the_stream_timer(CHAT)


def test_wrong_framing_fails():
    case = StreamCase("generate.ndjson", tokens=[1, 1, 1], api="native")
    with pytest.raises(AssertionError):
        suite(StatefulAcrossReads, FIXTURES / "ollama", case).test_decodes_as_declared(case)
