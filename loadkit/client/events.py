"""A stream's body bytes into its record: framing (SSE or NDJSON), the adapter's parser, and
every event stamped with the arrival of the read that completed it.

``EventDecoder.feed`` runs once per read of every stream: keep it flat and O(1) per event.
"""

from __future__ import annotations

from loadkit import types as t
from loadkit.client.adaptererr import describe
from loadkit.client.channels import apply_channels
from loadkit.client.sse import FastSSEDecoder, NDJSONDecoder
from loadkit.client.stamps import READS
from loadkit.client.streamend import END_CLOSE, END_MARKER, close_is_normal_end
from loadkit.core.adapter import EngineAdapter, StreamParser
from loadkit.core.channels import ChannelMarks
from loadkit.records import RequestRecord


class StreamDone(Exception):
    """Internal: the request's outcome is decided (``traceback``: an adapter_error's first)."""

    def __init__(self, outcome: str, error: str | None = None, traceback: str | None = None) -> None:
        self.outcome, self.error, self.traceback = outcome, error, traceback


def adapter_failed(adapter: EngineAdapter, call: str, exc: BaseException) -> StreamDone:
    """The adapter's own code raised (not MalformedEvent): outcome ``adapter_error``."""
    return StreamDone(t.ADAPTER_ERROR, *describe(adapter, call, exc))


class EventDecoder:
    """One request's decoding state; ``feed`` each read's body bytes with its arrival time."""

    __slots__ = (
        "adapter",
        "record",
        "decoder",
        "parser",
        "text_parts",
        "tokens_from_events",
        "marks",
        "failed",
    )

    def __init__(self, adapter: EngineAdapter, record: RequestRecord) -> None:
        self.adapter, self.record = adapter, record
        self.decoder: FastSSEDecoder | NDJSONDecoder = (
            FastSSEDecoder() if adapter.framing == "sse" else NDJSONDecoder()
        )
        self.text_parts: list[str] = []
        self.tokens_from_events = 0
        # The adapter's set-up raising is the request's outcome (the stream timer raises
        # ``failed`` before sending), never an exception out of the timer's constructor.
        self.failed: StreamDone | None = None
        self.marks: ChannelMarks | None = None
        call = "new_parser"
        try:
            self.parser: StreamParser = adapter.new_parser()
            call = "bind_channels"
            # The parser's reasoning / answer / tool-call marks (core/channels.py): it notes the
            # event index of each channel change; the figures are worked out once, in finish().
            self.marks = self.parser.bind_channels(record.event_t_ns, adapter.options)
        except Exception as exc:
            self.failed = adapter_failed(adapter, call, exc)

    def feed(self, t_read: int, chunk: bytes, late: bool = False) -> bool:
        """Handle the body bytes of one read; True once the engine's normal end arrived.
        ``late``: that read's data waited over the late mark in its socket (client.reads.Reads)."""
        try:
            events = self.decoder.feed(chunk)
        except UnicodeDecodeError as exc:
            raise StreamDone(t.MALFORMED_STREAM, f"invalid UTF-8 in stream: {exc}") from None
        # The per-event path, kept flat: it runs once for every token of every stream.
        rec, parse = self.record, self.parser.parse
        event_t, event_k, texts = rec.event_t_ns, rec.event_tokens, self.text_parts
        first = not event_t
        token_events = 0
        done = False
        for ev in events:
            try:  # _parse, inlined: one call less per event
                te = parse(ev.data, ev.event)
            except t.MalformedEvent as exc:
                raise StreamDone(t.MALFORMED_STREAM, str(exc)) from None
            except Exception as exc:  # the parser's own bug: no cost unless it raises
                raise adapter_failed(self.adapter, "parse", exc) from None
            if te is None:
                continue
            if te.error is not None:
                raise StreamDone(t.IN_BAND_ERROR, te.error)
            if te.tokens > 0 or te.text or te.reasoning_text:
                token_events += 1
                k = te.tokens if te.tokens > 0 else 1
                event_t.append(t_read)
                event_k.append(k)
                self.tokens_from_events += k
                if te.text:
                    texts.append(te.text)
            if te.usage is not None or te.finish_reason is not None or te.server_timings is not None:
                self._on_meta(te)
            if te.done:
                done = True
                break
        if token_events:
            reads = READS
            reads.events += token_events
            if first:
                reads.firsts += 1
            if token_events > 1:
                rec.coalesced_reads += 1
                reads.coalesced += 1
                reads.coalesced_events += token_events
                if late:
                    reads.late_coalesced += 1
                    reads.late_coalesced_events += token_events
                if first:
                    reads.first_coalesced += 1
                    if late:
                        reads.first_late_coalesced += 1
        return done

    def _parse(self, parser: StreamParser, data: str, event: str | None) -> t.TokenEvent | None:
        try:
            te = parser.parse(data, event)
        except t.MalformedEvent as exc:
            raise StreamDone(t.MALFORMED_STREAM, str(exc)) from None
        except Exception as exc:
            raise adapter_failed(self.adapter, "parse", exc) from None
        if te is not None and te.error is not None:
            raise StreamDone(t.IN_BAND_ERROR, te.error)
        return te

    def _on_tokens(self, t_read: int, te: t.TokenEvent) -> None:
        k = te.tokens if te.tokens > 0 else 1
        self.record.event_t_ns.append(t_read)
        self.record.event_tokens.append(k)
        self.tokens_from_events += k
        if te.text:
            self.text_parts.append(te.text)

    def _on_meta(self, te: t.TokenEvent) -> None:
        rec = self.record
        if te.usage is not None:
            u = te.usage
            if u.completion_tokens is not None:
                rec.n_out, rec.n_out_source = u.completion_tokens, "usage"
            if u.prompt_tokens is not None:
                rec.n_in = u.prompt_tokens
            if u.cached_tokens is not None:
                rec.cached_tokens = u.cached_tokens
            if u.reasoning_tokens is not None:
                rec.reasoning_tokens = u.reasoning_tokens
            if u.image_tokens is not None:
                rec.image_tokens = u.image_tokens
        if te.finish_reason is not None:
            rec.finish_reason = te.finish_reason
        if te.server_timings is not None:
            rec.server_timings = te.server_timings

    def close(self, clean: bool, t_read: int) -> None:
        """The body ended (cleanly or not) without the engine's normal end marker; ``t_read`` is
        the arrival of the read that ended it (t_end, as the marker's read is for a marker end)."""
        rec = self.record
        rec.t_end_ns = t_read
        try:
            tail = self.decoder.close()
        except UnicodeDecodeError as exc:
            raise StreamDone(t.MALFORMED_STREAM, f"stream ends inside a UTF-8 character: {exc}") from None
        for ev in tail:
            te = self._parse(self.parser, ev.data, ev.event)
            if te is not None:
                if te.tokens > 0 or te.text or te.reasoning_text:
                    self._on_tokens(rec.t_end_ns, te)
                self._on_meta(te)
                if te.done:
                    rec.end = END_MARKER
                    return
        if not clean:
            raise StreamDone(t.DISCONNECTED, "connection closed mid-stream")
        try:
            normal = close_is_normal_end(self.adapter, self.parser, rec)
        except Exception as exc:  # the parser's end_seen
            raise adapter_failed(self.adapter, "end_seen", exc) from None
        if normal:
            rec.end = END_CLOSE
            return
        raise StreamDone(t.INCOMPLETE, "stream closed without the engine's normal end (no end marker, "
                                       "no finish_reason)")  # fmt: skip

    def finish(self) -> None:
        """The record's text, and its token count from the events when usage gave none."""
        rec = self.record
        rec.text = "".join(self.text_parts)
        if rec.n_out is None and rec.event_t_ns:
            rec.n_out, rec.n_out_source = self.tokens_from_events, "events"
        if self.marks is not None:
            apply_channels(rec, self.marks)
