"""The engine-adapter contract suite: every built-in adapter runs it, and so can yours.

    from pathlib import Path
    from loadkit.testing.adapters import AdapterContract, StreamCase
    from loadkit_myengine import MyAdapter

    class TestMyAdapterContract(AdapterContract):
        adapter = MyAdapter
        fixtures = Path(__file__).parent / "fixtures"
        cases = [
            StreamCase("stream.sse", tokens=[1, 1, 1], text="Hi there", n_out=3),
            StreamCase("error.sse", outcome="in_band_error", error="overloaded"),
        ]

Each case is a recorded response body of the adapter's own wire format (SSE or NDJSON, as the
adapter's ``framing`` says; ``#`` lines are notes). For every case the suite checks, with the
stream timer's own decoders and outcome rules:

* the declared outcome, tokens per event, text, usage and error;
* the same result with the body split at every byte, one byte per read, one event per read;
* the same result with keep-alives and comments between the events;
* cut at every byte before its end: ``incomplete`` (``ok`` if the adapter ends on close),
  never an invented token; and without its end marker, likewise;
* invalid UTF-8 and invalid JSON in its first token event: ``malformed_stream``;
* through the real stream timer over loopback, one event per read: outcome, tokens per event,
  ``n_out`` and its source (the server's usage when it sent one, else the events: usage
  precedence), and each token's arrival time against the moment the server wrote it;
* cancellation mid-stream (a ``BaseException`` such as ``GreenletExit`` at test stop):
  ``cancelled``, the partial record delivered, the exception propagated.

Plus: each string in ``garbage`` makes the parser raise ``MalformedEvent``, fed as an unnamed
SSE event (``message``) and under every event name the adapter's recorded streams use (SSE
``event:`` names such as Anthropic's ``content_block_delta``), so a parser that skips what it
cannot read in a named event fails too (under a named event, an in-band error carrying it
also passes: an ``error`` event is an error whatever its data). Override :meth:`AdapterContract.make_adapter` to
build the adapter with other options.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from loadkit import types as t
from loadkit.client import timer
from loadkit.client.sse import FastSSEDecoder, NDJSONDecoder
from loadkit.core.adapter import AdapterOptions, EngineAdapter, StreamParser
from loadkit.records import RequestRecord
from loadkit.testing.replay import Replay, fixture_body, replay, replay_pieces, split_events, token_sources
from loadkit.testing.streamserver import Stream, stream_server

# Messages no adapter can interpret: each must raise MalformedEvent, never return None.
GARBAGE = ("not json", "[1, 2]", '"text"', "{}", '{"unexpected": true}')
SSE_KEEPALIVES = (b": keep-alive\n\n", b":\n\n", b": " + b"x" * 200 + b"\n\n")
NDJSON_KEEPALIVES = (b"\n", b"\r\n", b"   \n")
REQUEST = t.GenerationRequest(prompt="contract test", max_tokens=16)
TIMEOUTS = timer.Timeouts(connect_s=2, first_token_s=10, total_s=20)


@dataclass(frozen=True)
class StreamCase:
    """One recorded response and what it must decode to; None fields are not checked.

    ``tokens``: tokens per token-bearing event (``RequestRecord.event_tokens``). ``usage``: the
    last usage the stream reports. ``n_out``: the request's output tokens through the timer.
    ``error``: a substring of the in-band error. ``api``: the endpoint family to build the
    adapter with (None: its default).
    """

    fixture: str
    outcome: str = t.OK
    tokens: Sequence[int] | None = None
    text: str | None = None
    usage: t.Usage | None = None
    n_out: int | None = None
    error: str | None = None
    api: str | None = None

    @property
    def id(self) -> str:
        return self.fixture + (f"-{self.api}" if self.api else "")


class _Cancelled(BaseException):
    """Stands for GreenletExit: a BaseException arriving while the stream is read."""


class _CancellingParser(StreamParser):
    def __init__(self, inner: StreamParser, after_tokens: int) -> None:
        self.inner, self.after, self.seen = inner, after_tokens, 0

    def parse(self, data: str, event: str | None = None) -> t.TokenEvent | None:
        if self.seen >= self.after:
            raise _Cancelled("test stop")
        te = self.inner.parse(data, event)
        if te is not None and (te.tokens > 0 or te.text or te.reasoning_text):
            self.seen += 1
        return te


class AdapterContract:
    """Subclass as ``class Test...(AdapterContract)``; set ``adapter``, ``fixtures``, ``cases``."""

    adapter: ClassVar[type[EngineAdapter]]
    fixtures: ClassVar[Path]
    cases: ClassVar[Sequence[StreamCase]] = ()
    garbage: ClassVar[Sequence[str]] = GARBAGE
    # Event names each garbage string is fed under, besides "message". None: every name the
    # recorded streams of the endpoint family use (as the timer's decoder reads them), and
    # those of ``keepalives``. Set it to leave out a name whose data your protocol ignores.
    garbage_events: ClassVar[Sequence[str] | None] = None
    # Extra keep-alives of the adapter's protocol (e.g. b"event: ping\ndata: {...}\n\n").
    keepalives: ClassVar[Sequence[bytes]] = ()
    # Above this many bytes, "every byte" becomes this many evenly spread split points.
    max_splits: ClassVar[int] = 4000
    event_gap_s: ClassVar[float] = 0.004
    # Median lateness allowed between the server's write and the recorded arrival.
    median_lateness_ms: ClassVar[float] = 3.0

    def pytest_generate_tests(self, metafunc: Any) -> None:
        if "case" in metafunc.fixturenames:
            # Only the cases a check applies to (an error stream has no end marker to remove).
            cases = [c for c in self.cases if self._applies(metafunc.function.__name__, c)]
            metafunc.parametrize("case", cases, ids=[c.id for c in cases])
        if "garbage_message" in metafunc.fixturenames:
            triples = self.garbage_cases()
            metafunc.parametrize(
                ("api", "event_name", "garbage_message"),
                triples,
                ids=[f"{a}-{e}-{g[:16]}" for a, e, g in triples],
            )

    def garbage_cases(self) -> list[tuple[str | None, str, str]]:
        """(endpoint family, event name, garbage) for every garbage check."""
        named = sorted({c.api for c in self.cases if c.api})
        apis: list[str | None] = [*named] if named else [None]
        return [(a, e, g) for a in apis for e in self.event_names(a) for g in self.garbage]

    def event_names(self, api: str | None) -> list[str]:
        """``message`` and the event names garbage is fed under for endpoint family ``api``."""
        if self.garbage_events is not None:
            return sorted({"message", *self.garbage_events})
        adapter = self.make_adapter(StreamCase("", api=api))
        bodies = [self.body(c) for c in self.cases if c.api == api or api is None]
        names = {"message"}
        for body in [*bodies, *self.keepalives]:
            decoder = FastSSEDecoder() if adapter.framing == "sse" else NDJSONDecoder()
            try:
                names.update(m.event for m in [*decoder.feed(body), *decoder.close()])
            except UnicodeDecodeError:
                continue  # a fixture with broken bytes on purpose: its names come from the others
        return sorted(names)

    # ---- helpers a subclass may override ------------------------------------------------

    def make_adapter(self, case: StreamCase) -> EngineAdapter:
        return self.adapter(AdapterOptions(model="contract-model", api=case.api))

    def body(self, case: StreamCase) -> bytes:
        return fixture_body(self.fixtures / case.fixture)

    # ---- the contract -------------------------------------------------------------------

    def test_decodes_as_declared(self, case: StreamCase) -> None:
        r = replay(self.make_adapter(case), self.body(case))
        assert r.outcome == case.outcome, f"{case.id}: {r.outcome} ({r.error})"
        if case.tokens is not None:
            assert r.tokens == list(case.tokens), case.id
        if case.text is not None:
            assert r.text == case.text, case.id
        if case.usage is not None:
            assert r.usage == case.usage, case.id
        if case.error is not None:
            assert r.error is not None and case.error in r.error, f"{case.id}: {r.error!r}"
        if case.outcome == t.OK:
            assert r.token_events, f"{case.id}: an ok case must carry tokens"

    def test_split_at_every_byte(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        whole = replay(adapter, body).summary()
        for i in self._points(len(body)):
            assert replay_pieces(adapter, [body[:i], body[i:]]).summary() == whole, (
                f"{case.id}: split at byte {i}"
            )
        assert replay(adapter, body, 1).summary() == whole, f"{case.id}: one byte per read"

    def test_split_at_every_event(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        whole = replay(adapter, body).summary()
        events = split_events(body, adapter.framing)
        assert replay_pieces(adapter, events).summary() == whole, f"{case.id}: one event per read"
        pairs = [b"".join(events[i : i + 2]) for i in range(0, len(events), 2)]
        assert replay_pieces(adapter, pairs).summary() == whole, f"{case.id}: two events per read"

    def test_keepalives_and_comments_between_events(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        whole = replay(adapter, body).summary()
        defaults = SSE_KEEPALIVES if adapter.framing == "sse" else NDJSON_KEEPALIVES
        for keepalive in (*defaults, *self.keepalives):
            mixed = keepalive + keepalive.join(split_events(body, adapter.framing))
            assert replay(adapter, mixed).summary() == whole, (
                f"{case.id}: with {keepalive[:30]!r} between events"
            )

    def test_cut_before_the_end_is_incomplete(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        full = replay(adapter, body)
        end = self._decided_at(adapter, body)
        allowed = {t.OK} if adapter.end_on_close else {t.INCOMPLETE}
        if adapter.framing == "ndjson":
            allowed.add(t.MALFORMED_STREAM)  # a last line without its newline is still parsed
        for i in self._points(end):
            cut = replay(adapter, body[:i])
            if cut.outcome == t.MALFORMED_STREAM and "UTF-8" in (cut.error or ""):
                continue  # cut inside a multi-byte character: the timer says so too
            # Cut after the message carrying the finish_reason: the close is a normal end.
            ok_by_close = (
                cut.outcome == t.OK and cut.end == "close" and (adapter.end_on_close or cut.finished)
            )
            assert cut.outcome in allowed or ok_by_close, (
                f"{case.id}: cut at byte {i} of {end}: {cut.outcome} ({cut.error})"
            )
            assert full.tokens[: len(cut.tokens)] == cut.tokens, f"{case.id}: cut at byte {i} invents tokens"

    def test_without_its_end_marker(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        events = split_events(body, adapter.framing)
        last = self._deciding_event(adapter, events)
        assert last is not None, case.id
        r = replay_pieces(adapter, events[:last] + events[last + 1 :])
        # The close is then the end when the adapter ends by closing or a message carried a
        # finish_reason (or the parser saw its final message); otherwise nothing is.
        if r.outcome == t.OK:
            assert r.end == "close", f"{case.id}: without event {last}: ok, but ended by {r.end}"
        else:
            assert r.outcome == t.INCOMPLETE and not (adapter.end_on_close or r.finished), (
                f"{case.id}: without event {last}: {r.outcome} ({r.error})"
            )

    def test_invalid_utf8_is_malformed(self, case: StreamCase) -> None:
        adapter, events, first = self._first_token_event(case)
        bad = (
            events[first][: len(events[first]) // 2] + b"\xff\xfe" + events[first][len(events[first]) // 2 :]
        )
        r = replay_pieces(adapter, [*events[:first], bad, *events[first + 1 :]])
        assert r.outcome == t.MALFORMED_STREAM, f"{case.id}: {r.outcome}"

    def test_invalid_json_is_malformed(self, case: StreamCase) -> None:
        adapter, events, first = self._first_token_event(case)
        lines = events[first].rstrip(b"\r\n").split(b"\n")
        half = lines[-1][: max(len(lines[-1]) // 2, lines[-1].find(b"{") + 2)]
        end = b"\n\n" if adapter.framing == "sse" else b"\n"
        bad = b"\n".join([*lines[:-1], half]) + end
        r = replay_pieces(adapter, [*events[:first], bad, *events[first + 1 :]])
        assert r.outcome == t.MALFORMED_STREAM, f"{case.id}: {bad!r} gave {r.outcome}"

    def test_garbage_is_malformed(self, api: str | None, event_name: str, garbage_message: str) -> None:
        parser = self.make_adapter(StreamCase("", api=api)).new_parser()
        try:
            got = parser.parse(garbage_message, event_name)
        except t.MalformedEvent:
            return
        # A named event may say by its name that it is an error whatever its data (llama.cpp's
        # `error:` line arrives as event "error"): reported as an in-band error, it is not lost.
        if event_name != "message" and got is not None and got.error is not None:
            return
        pytest.fail(
            f"{garbage_message!r} as event {event_name!r} ({api or 'default'} API) gave {got!r}, "
            "not MalformedEvent: the stream would go on as if nothing was wrong"
        )

    def test_through_the_stream_timer(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        expected = replay(adapter, body)
        events = split_events(body, adapter.framing)
        record, sent = self._live(adapter, events)
        assert record.outcome == case.outcome, f"{case.id}: {record.outcome} ({record.error})"
        assert record.event_tokens == list(expected.tokens if case.tokens is None else case.tokens), case.id
        if case.error is not None:
            assert record.error is not None and case.error in record.error, case.id
        self._check_n_out(case, record, expected)
        sources = token_sources(adapter, events)
        late_ms = [(t_ns - sent[i]) / 1e6 for t_ns, i in zip(record.event_t_ns, sources, strict=True)]
        assert all(lag > -0.5 for lag in late_ms), (
            f"{case.id}: a token recorded before it was sent: {late_ms}"
        )
        if late_ms:
            assert statistics.median(late_ms) < self.median_lateness_ms, f"{case.id}: late by {late_ms} ms"

    def test_cancelled_mid_stream(self, case: StreamCase) -> None:
        adapter, body = self.make_adapter(case), self.body(case)
        make = adapter.new_parser
        adapter.new_parser = lambda: _CancellingParser(make(), 1)  # type: ignore[method-assign]
        got: list[RequestRecord] = []
        with (
            pytest.raises(_Cancelled),
            stream_server(self._routes(adapter, split_events(body, adapter.framing))) as s,
        ):
            timer.run_request(adapter, s.url, REQUEST, timeouts=TIMEOUTS, sink=got.append)
        (record,) = got
        assert record.outcome == t.CANCELLED and record.t_end_ns is not None, case.id
        assert len(record.event_tokens) == 1, f"{case.id}: the token before the stop is kept"

    # ---- internals ----------------------------------------------------------------------

    def _applies(self, test: str, case: StreamCase) -> bool:
        adapter, body = self.make_adapter(case), self.body(case)
        if test == "test_without_its_end_marker":
            return (
                case.outcome == t.OK
                and self._deciding_event(adapter, split_events(body, adapter.framing)) is not None
            )
        if test in ("test_invalid_utf8_is_malformed", "test_invalid_json_is_malformed"):
            return bool(token_sources(adapter, split_events(body, adapter.framing)))
        if test == "test_cancelled_mid_stream":
            return len(replay(adapter, body).tokens) >= 2
        return True

    def _points(self, n: int) -> range:
        step = max(1, n // self.max_splits)
        return range(1, n, step)

    def _deciding_event(self, adapter: EngineAdapter, events: list[bytes]) -> int | None:
        """Index of the event that gave the outcome (done or error), None if the close did."""
        for k in range(1, len(events) + 1):
            r = replay_pieces(adapter, events[:k])
            # The end marker or an error decided; for an adapter that ends by closing, its last event.
            if r.outcome != t.INCOMPLETE and (
                r.end != "close" or (adapter.end_on_close and k == len(events))
            ):
                return k - 1
        return None

    def _decided_at(self, adapter: EngineAdapter, body: bytes) -> int:
        """Bytes up to (not including) the end of the deciding event."""
        events = split_events(body, adapter.framing)
        k = self._deciding_event(adapter, events)
        if k is None:
            return len(body)
        return sum(len(e) for e in events[:k]) + len(events[k].rstrip(b"\r\n"))

    def _first_token_event(self, case: StreamCase) -> tuple[EngineAdapter, list[bytes], int]:
        adapter, body = self.make_adapter(case), self.body(case)
        events = split_events(body, adapter.framing)
        return adapter, events, token_sources(adapter, events)[0]

    def _check_n_out(self, case: StreamCase, record: RequestRecord, expected: Replay) -> None:
        reported = [
            e.usage.completion_tokens
            for e in expected.events
            if e.usage is not None and e.usage.completion_tokens is not None
        ]
        if reported:  # usage precedence: the server's last count wins over counting events
            assert (record.n_out, record.n_out_source) == (reported[-1], "usage"), case.id
        elif record.event_tokens:
            assert (record.n_out, record.n_out_source) == (sum(record.event_tokens), "events"), case.id
        if case.n_out is not None:
            assert record.n_out == case.n_out, case.id

    def _routes(self, adapter: EngineAdapter, events: list[bytes]) -> dict[tuple[str, str], Stream]:
        http = adapter.build_request(REQUEST)
        ctype = "text/event-stream" if adapter.framing == "sse" else "application/x-ndjson"
        return {(http.method, http.path): Stream(events, content_type=ctype, gap_s=self.event_gap_s)}

    def _live(self, adapter: EngineAdapter, events: list[bytes]) -> tuple[RequestRecord, list[int]]:
        with stream_server(self._routes(adapter, events)) as server:
            record = timer.run_request(adapter, server.url, REQUEST, timeouts=TIMEOUTS)
        return record, server.sent[0]
