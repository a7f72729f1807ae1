"""The contract suite fails adapters that break the contract (a suite that cannot fail is no test)."""

from pathlib import Path

import orjson
import pytest

from loadkit import types as t
from loadkit.engines.base import EngineAdapter, StreamParser
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.testing.adapters import AdapterContract, StreamCase
from tests.helpers.wire import FIXTURES

HERE = Path(__file__).parent
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
        s.test_garbage_is_malformed("chat", "message", "not json")
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


class NamedEvents(EngineAdapter):
    """A protocol of named SSE events (fixtures/named_events.sse): the event name says what the
    data is, as in Anthropic's Messages API. Strict: anything it cannot read is malformed."""

    name = "named-events"

    def build_request(self, request: t.GenerationRequest) -> t.HttpRequest:
        return t.HttpRequest(
            "POST", "/v1/named", orjson.dumps({"prompt": request.prompt}), self.base_headers()
        )

    def new_parser(self) -> StreamParser:
        return NamedParser()


class NamedParser(StreamParser):
    def parse(self, data: str, event: str | None = None) -> t.TokenEvent | None:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise t.MalformedEvent(f"invalid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise t.MalformedEvent(f"not an object: {data[:40]!r}")
        if event == "token" and isinstance(obj.get("text"), str):
            return t.TokenEvent(tokens=1, text=obj["text"])
        if event == "usage" and isinstance(obj.get("output_tokens"), int):
            return t.TokenEvent(usage=t.Usage(completion_tokens=obj["output_tokens"]))
        if event == "done" and obj.get("stop") is True:
            return t.TokenEvent(done=True)
        if event == "ping" and obj.get("type") == "ping":
            return None
        raise t.MalformedEvent(f"unexpected {event} event: {data[:40]!r}")


class SkipsNamed(NamedEvents):
    """Refuses bad JSON and unnamed events, but skips a named event whose JSON it cannot use:
    a token, usage or done event with the wrong fields vanishes and the stream looks fine."""

    def new_parser(self) -> StreamParser:
        strict = NamedParser()

        class P(StreamParser):
            def parse(self, data, event=None):
                try:
                    return strict.parse(data, event)
                except t.MalformedEvent:
                    if event == "message" or not valid_json(data):
                        raise
                    return None

        return P()


def valid_json(data: str) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


NAMED = StreamCase("named_events.sse", tokens=[1, 1], text="Hi there", n_out=2)


def garbage_failures(adapter):
    s = suite(adapter, HERE / "fixtures", NAMED)
    failed = []
    for api, event, garbage in s.garbage_cases():
        try:
            s.test_garbage_is_malformed(api, event, garbage)
        except pytest.fail.Exception:
            failed.append((event, garbage))
    return s, failed


def test_garbage_goes_under_every_event_name_the_streams_use():
    s, failed = garbage_failures(NamedEvents)
    assert s.event_names(None) == ["done", "message", "ping", "token", "usage"]
    assert failed == []


def test_a_parser_skipping_malformed_named_events_fails_the_garbage_check():
    s, failed = garbage_failures(SkipsNamed)
    # Every named event skips the well-formed JSON garbage; "message" and broken JSON are refused.
    assert {event for event, _ in failed} == {"done", "ping", "token", "usage"}
    assert "not json" not in {g for _, g in failed}, failed
    # The rest of the contract does not see it: the garbage check is what catches it.
    s.test_decodes_as_declared(NAMED)
    s.test_invalid_json_is_malformed(NAMED)
    s.test_through_the_stream_timer(NAMED)
