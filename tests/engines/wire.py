"""Replaying recorded streams through an adapter exactly as the stream timer would: the
adapter's declared framing, its parser, and the timer's outcome rules (MalformedEvent ->
malformed_stream, TokenEvent.error -> in_band_error, done -> ok; a clean end without done is ok
when the adapter ends on close, after a finish_reason, or when the parser's end_seen() says so,
else incomplete)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadkit import types as t
from loadkit.engines.base import EngineAdapter
from loadkit.sse import NDJSONDecoder, SSEDecoder

FIXTURES = Path(__file__).parent / "fixtures"


def body_bytes(name: str) -> bytes:
    """A fixture's stream body: notes (``#`` lines) and a captured HTTP head removed."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [line for line in lines if not line.startswith("#")]
    if lines and lines[0].startswith("HTTP/"):
        lines = lines[lines.index("\n") + 1 :]
    return "".join(lines).encode()


@dataclass
class Replay:
    outcome: str = t.INCOMPLETE
    error: str | None = None
    events: list[t.TokenEvent] = field(default_factory=list)

    @property
    def token_events(self) -> list[t.TokenEvent]:
        return [e for e in self.events if e.tokens > 0 or e.text or e.reasoning_text]

    @property
    def tokens(self) -> list[int]:
        return [e.tokens if e.tokens > 0 else 1 for e in self.token_events]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events)

    @property
    def reasoning(self) -> str:
        return "".join(e.reasoning_text for e in self.events)

    @property
    def usage(self) -> t.Usage | None:
        found = [e.usage for e in self.events if e.usage is not None]
        return found[-1] if found else None


def replay(adapter: EngineAdapter, body: bytes, chunk: int | None = None) -> Replay:
    decoder = SSEDecoder() if adapter.framing == "sse" else NDJSONDecoder()
    parser = adapter.new_parser()
    result = Replay()
    size = chunk or len(body) or 1
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    for piece in pieces:
        if _feed(parser, decoder.feed(piece), result):
            return result
    if _feed(parser, decoder.close(), result):
        return result
    finished = any(e.finish_reason is not None for e in result.events)
    if getattr(adapter, "end_on_close", False) or finished or parser.end_seen():
        result.outcome = t.OK
    return result


def _feed(parser, messages, result: Replay) -> bool:  # type: ignore[no-untyped-def]
    for msg in messages:
        try:
            event = parser.parse(msg.data, msg.event)
        except t.MalformedEvent as exc:
            result.outcome, result.error = t.MALFORMED_STREAM, str(exc)
            return True
        if event is None:
            continue
        result.events.append(event)
        if event.error is not None:
            result.outcome, result.error = t.IN_BAND_ERROR, event.error
            return True
        if event.done:
            result.outcome = t.OK
            return True
    return False
