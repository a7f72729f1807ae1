"""A non-streamed kind's answer (embeddings, rerank, a plugin's kind) into its record.

``BodyDecoder`` stands where ``events.EventDecoder`` stands for a stream, with the same calls
from the stream timer: ``feed`` keeps each read's bytes (no parsing per read: the answer is one
JSON document), ``close`` runs once when the body is complete and hands it to the adapter's
``BodyParser``. The request's end is the arrival of the read that completed the body, stamped
like any other read (kernel receive stamps where available); it has no token events, so TTFT,
TPOT and ITL stay None and its figure is the latency (E2E) and the latency per item.

Outcomes: the parser raising ``MalformedEvent`` is ``malformed_stream`` (its message says what
was wrong), any other exception ``adapter_error`` (client/adaptererr.py); an ``error`` in the
result is ``in_band_error``; fewer or more items than were sent is ``incomplete``; else ``ok``
with ``end`` "body".
"""

from __future__ import annotations

from collections.abc import Mapping

from loadkit import types as t
from loadkit.client.events import StreamDone, adapter_failed
from loadkit.core.adapter import EngineAdapter
from loadkit.core.kinds import CHAT, BodyParser, BodyResult
from loadkit.records import RequestRecord

# RequestRecord.end of an ok request answered in one body (docs/reports.md).
END_BODY = "body"


def is_streamed(kind: str) -> bool:
    """Whether requests of ``kind`` are answered as a token stream (chat) or in one body. Chat
    is decided without the registry: it is every request of a text load."""
    if kind == CHAT:
        return True
    from loadkit.plugins import get_kind

    return get_kind(kind).streaming


class BodyDecoder:
    """One non-streamed request's body: bytes kept per read, parsed once at its end."""

    __slots__ = ("adapter", "record", "parts", "parser", "failed", "headers", "expected")

    def __init__(self, adapter: EngineAdapter, record: RequestRecord, request: t.GenerationRequest) -> None:
        self.adapter, self.record = adapter, record
        self.parts: list[bytes] = []
        self.headers: Mapping[str, str] = {}
        # The answers due: one per item, or a rerank's top_n when it asked for fewer.
        self.expected = request.n_items
        self.failed: StreamDone | None = None
        try:
            self.parser: BodyParser = adapter.new_body_parser(request)
        except Exception as exc:
            self.failed = adapter_failed(adapter, "new_body_parser", exc)
            return
        top_n = request.top_n
        if top_n is not None and self.expected is not None and getattr(self.parser, "honours_top_n", True):
            self.expected = min(self.expected, top_n)

    def feed(self, t_read: int, chunk: bytes, late: bool = False) -> bool:
        """Keep one read's body bytes; the answer ends with the body, never at a marker."""
        if chunk:
            self.parts.append(chunk)
        return False

    def close(self, clean: bool, t_read: int) -> None:
        """The body ended at ``t_read`` (the arrival of its last read): parse and classify."""
        rec = self.record
        rec.t_end_ns = t_read
        if not clean:
            raise StreamDone(t.DISCONNECTED, "connection closed before the whole answer arrived")
        body = b"".join(self.parts)
        self.parts = []
        try:
            result = self.parser.parse_body(body, self.headers)
        except t.MalformedEvent as exc:
            raise StreamDone(t.MALFORMED_STREAM, str(exc)) from None
        except Exception as exc:  # the adapter's own bug
            raise adapter_failed(self.adapter, "parse_body", exc) from None
        self._apply(result)

    def _apply(self, result: BodyResult) -> None:
        rec = self.record
        if result.usage is not None:
            u = result.usage
            if u.prompt_tokens is not None:
                rec.n_in = u.prompt_tokens
        if result.server_timings is not None:
            rec.server_timings = result.server_timings
        rec.n_items_returned = result.items
        if result.error is not None:
            raise StreamDone(t.IN_BAND_ERROR, result.error)
        due = self.expected
        if due is not None and result.items != due:
            raise StreamDone(
                t.INCOMPLETE, f"{_count(result.items, rec.kind)} for {_count(due, rec.kind, True)}"
            )
        rec.end = END_BODY

    def finish(self) -> None:
        """Nothing to add at the end: no text, no token count (n_out stays None)."""


def _count(n: int | None, kind: str, sent: bool = False) -> str:
    """'3 embeddings' / '4 inputs' for the incomplete message, in the kind's own words."""
    if n is None:
        return "no count of answers"
    if kind == "embeddings":
        noun = "input" if sent else "embedding"
    elif kind == "rerank":
        noun = "document" if sent else "score"
    else:
        noun = "item" if sent else "answer"
    return f"{n} {noun}{'' if n == 1 else 's'}"
