"""An adapter's own code raising (anything but MalformedEvent) is the request's outcome
`adapter_error`, on every call the stream timer makes into the adapter: one line naming the
engine, who provides it, the call and the exception; the first traceback of each kind kept."""

from __future__ import annotations

import pytest

from loadkit import types as t
from loadkit.client import adaptererr
from loadkit.client.timer import run_request
from loadkit.engines.openai import OpenAIAdapter, OpenAIStreamParser
from loadkit.plugins import get_engine
from tests.helpers.openai_chunks import DONE, REQ, ROLE, USAGE, delta, sse
from tests.helpers.scripted_server import END_CHUNK, Script, ScriptedServer


def stream(*extra: bytes) -> Script:
    return Script(writes=[(0.0, w) for w in (ROLE, delta("a"), delta("bb"), delta("ccc"), *extra, END_CHUNK)])


class OddParser(OpenAIStreamParser):
    """Raises on an event whose text has an odd length (the issue's plugin)."""

    def parse(self, data, event=None):
        te = super().parse(data, event)
        if te is not None and len(te.text) % 2:
            raise ValueError(f"odd text of {len(te.text)} chars")
        return te


class Broken(OpenAIAdapter):
    name = "broken"
    call = "parse"

    def build_request(self, request):
        if self.call == "build_request":
            raise KeyError("model")
        return super().build_request(request)

    def new_parser(self):
        if self.call == "new_parser":
            raise RuntimeError("no parser today")
        parser = OddParser(chat=True)
        if self.call == "end_seen":
            parser.parse = OpenAIStreamParser(chat=True).parse  # type: ignore[method-assign]
            parser.end_seen = lambda: 1 / 0  # type: ignore[method-assign]
        return parser


@pytest.fixture(autouse=True)
def fresh_kinds():
    adaptererr.forget_kinds()
    yield
    adaptererr.forget_kinds()


@pytest.mark.parametrize("call", ["parse", "build_request", "new_parser", "end_seen"])
def test_every_adapter_call_that_raises_is_an_adapter_error(call):
    adapter = Broken()
    adapter.call = call
    # end_seen is asked only when the body closes cleanly without [DONE] or a finish_reason.
    script = stream(USAGE) if call == "end_seen" else stream(USAGE, DONE)
    with ScriptedServer(lambda _req: script) as srv:
        rec = run_request(adapter, srv.url, REQ)
    assert rec.outcome == t.ADAPTER_ERROR, (rec.outcome, rec.error)
    assert rec.error is not None and rec.error.startswith(f"engine 'broken' (adapter {__name__}.Broken, not a "
                                                          f"registered engine): {call} raised ")  # fmt: skip
    assert rec.traceback is not None and rec.traceback.startswith("Traceback") and __file__ in rec.traceback
    assert rec.t_send_ns > 0 and rec.t_end_ns is not None and rec.t_end_ns >= rec.t_send_ns
    if call == "parse":  # the first event ("a") raised: nothing after it is counted
        assert rec.error.endswith("parse raised ValueError: odd text of 1 chars") and rec.event_t_ns == []


def test_only_the_first_of_a_kind_keeps_its_traceback():
    adapter = Broken()
    with ScriptedServer(lambda _req: stream(USAGE, DONE)) as srv:
        first, second = (run_request(adapter, srv.url, REQ) for _ in range(2))
    assert first.outcome == second.outcome == t.ADAPTER_ERROR
    assert first.traceback is not None and second.traceback is None
    adaptererr.forget_kinds()  # a new run: its first one has it again
    with ScriptedServer(lambda _req: stream(USAGE, DONE)) as srv:
        assert run_request(adapter, srv.url, REQ).traceback is not None


def test_a_registered_engine_is_named_with_its_plugin():
    info = get_engine("openai")
    parser = OpenAIStreamParser(chat=True)
    message, _ = adaptererr.describe(OpenAIAdapter(), "parse", TypeError("bad  \n text"))
    assert message == (f"engine 'openai' (plugin {info.plugin} {info.version}, adapter "
                       "loadkit.engines.openai.OpenAIAdapter): parse raised TypeError: bad text")  # fmt: skip
    assert parser.parse('{"choices": []}') is not None  # the built-in parser itself is untouched


def test_malformed_event_is_still_malformed_stream():
    script = Script(writes=[(0.0, ROLE), (0.0, sse('{"choices": [')), (0.0, END_CHUNK)])
    with ScriptedServer(lambda _req: script) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == t.MALFORMED_STREAM and rec.traceback is None
