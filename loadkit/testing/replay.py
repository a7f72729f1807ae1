"""Replaying a recorded stream through an adapter exactly as the stream timer would.

The adapter's declared framing, its parser, and the timer's outcome rules: invalid UTF-8 or
``MalformedEvent`` -> ``malformed_stream``, ``TokenEvent.error`` -> ``in_band_error``, ``done``
-> ``ok``, the end of the body without ``done`` -> ``incomplete`` unless the adapter ends on
close. No socket, no clock: for timing, run :func:`loadkit.client.timer.run_request` against
:mod:`loadkit.testing.streamserver`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadkit import types as t
from loadkit.client.sse import FastSSEDecoder, NDJSONDecoder, SSEEvent
from loadkit.client.streamend import END_CLOSE, END_MARKER
from loadkit.core.adapter import EngineAdapter, StreamParser

_SSE_END = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)")
_LINE_END = re.compile(rb"(?<=\n)")


def fixture_body(path: str | Path) -> bytes:
    """A recorded stream's body: note lines (starting with ``#``) and a captured HTTP head removed."""
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [line for line in lines if not line.startswith("#")]
    if lines and lines[0].startswith("HTTP/"):
        lines = lines[lines.index("\n") + 1 :] if "\n" in lines else []
    return "".join(lines).encode()


def split_events(body: bytes, framing: str) -> list[bytes]:
    """The body cut after every message: each piece is one SSE event (blank line included) or line."""
    pattern = _SSE_END if framing == "sse" else _LINE_END
    return [piece for piece in pattern.split(body) if piece]


@dataclass
class Replay:
    """What the timer would have made of a stream: outcome, error, and every TokenEvent."""

    outcome: str = t.INCOMPLETE
    error: str | None = None
    events: list[t.TokenEvent] = field(default_factory=list)
    # How an ok stream ended, as RequestRecord.end: "marker" (the protocol's end) or "close".
    end: str | None = None

    @property
    def finished(self) -> bool:
        """A message carried a finish_reason: a clean close after it is a normal end."""
        return any(e.finish_reason is not None for e in self.events)

    @property
    def token_events(self) -> list[t.TokenEvent]:
        return [e for e in self.events if e.tokens > 0 or e.text or e.reasoning_text]

    @property
    def tokens(self) -> list[int]:
        """Tokens per token-bearing event, as the timer records them (``event_tokens``)."""
        return [e.tokens if e.tokens > 0 else 1 for e in self.token_events]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events)

    @property
    def reasoning(self) -> str:
        return "".join(e.reasoning_text for e in self.events)

    @property
    def usage(self) -> t.Usage | None:
        """The last usage the stream reported (the timer keeps the latest non-None fields)."""
        found = [e.usage for e in self.events if e.usage is not None]
        return found[-1] if found else None

    def summary(self) -> tuple[str, list[int], str, str, t.Usage | None]:
        """What must not depend on how the bytes were split: outcome, tokens, text, usage."""
        return self.outcome, self.tokens, self.text, self.reasoning, self.usage


def replay(adapter: EngineAdapter, body: bytes, chunk: int | None = None) -> Replay:
    """Feed ``body`` in pieces of ``chunk`` bytes (default: all at once)."""
    size = chunk or len(body) or 1
    return replay_pieces(adapter, [body[i : i + size] for i in range(0, len(body), size)])


def replay_pieces(adapter: EngineAdapter, pieces: Iterable[bytes]) -> Replay:
    """Feed the body as these reads, in order, then close it cleanly."""
    # The timer's own decoders: the fast SSE path and its fall-back must agree with the adapter.
    decoder = FastSSEDecoder() if adapter.framing == "sse" else NDJSONDecoder()
    parser = adapter.new_parser()
    result = Replay()
    try:
        for piece in pieces:
            if _feed(parser, decoder.feed(piece), result):
                return result
        if _feed(parser, decoder.close(), result):
            return result
    except UnicodeDecodeError as exc:
        result.outcome, result.error = t.MALFORMED_STREAM, f"invalid UTF-8 in stream: {exc}"
        return result
    # The timer's rule for a clean close without the end marker (loadkit/client/streamend.py).
    end_seen = getattr(parser, "end_seen", None)
    if getattr(adapter, "end_on_close", False) or result.finished or (end_seen is not None and end_seen()):
        result.outcome, result.end = t.OK, END_CLOSE
    return result


def _feed(parser: StreamParser, messages: list[SSEEvent], result: Replay) -> bool:
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
            result.outcome, result.end = t.OK, END_MARKER
            return True
    return False


def token_sources(adapter: EngineAdapter, pieces: Sequence[bytes]) -> list[int]:
    """For each token-bearing event, the index of the piece whose bytes completed it."""
    decoder = FastSSEDecoder() if adapter.framing == "sse" else NDJSONDecoder()
    parser = adapter.new_parser()
    sources: list[int] = []
    for index, piece in enumerate(pieces):
        for msg in decoder.feed(piece):
            event = parser.parse(msg.data, msg.event)
            if event is None:
                continue
            if event.error is not None or event.done:
                if event.tokens > 0 or event.text or event.reasoning_text:
                    sources.append(index)
                return sources
            if event.tokens > 0 or event.text or event.reasoning_text:
                sources.append(index)
    return sources
