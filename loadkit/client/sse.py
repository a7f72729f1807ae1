"""Incremental Server-Sent-Events decoder following the WHATWG event-stream rules.

Bytes may be split anywhere, including inside a multi-byte UTF-8 character and between the CR
and LF of a CRLF. Lines end in LF, CRLF or CR. Fields: ``data`` (joined with LF when repeated),
``event``, ``id`` (ignored if it contains NUL), ``retry``; lines starting with ``:`` are
comments (keep-alives). One deliberate extension: an ``error`` field (llama.cpp's in-band
error line) becomes data of an event named "error" rather than being ignored. An event is dispatched at a blank line, and only if it has data.

The decoder does not timestamp: the caller stamps the read that completed each event.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(slots=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed bytes with `feed`; it returns the events completed by those bytes."""

    __slots__ = (
        "_utf8",
        "_buf",
        "_pending_cr",
        "_data",
        "_event",
        "_last_id",
        "_retry",
        "_bom_checked",
        "comments",
    )

    def __init__(self) -> None:
        # An incremental decoder carries a split multi-byte character over to the next feed.
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._buf = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._bom_checked = False
        self.comments = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk``; raise UnicodeDecodeError on invalid UTF-8."""
        text = self._utf8.decode(chunk)
        if not self._bom_checked and text:
            self._bom_checked = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # second half of a CRLF split across feeds
        self._pending_cr = False
        if not text:
            return []
        buf = self._buf + text
        events: list[SSEEvent] = []
        start = 0
        n = len(buf)
        while True:
            lf = buf.find("\n", start)
            cr = buf.find("\r", start)
            if lf < 0 and cr < 0:
                break
            if cr < 0 or (0 <= lf < cr):
                end, nxt = lf, lf + 1
            elif cr + 1 < n:
                end, nxt = cr, cr + 2 if buf[cr + 1] == "\n" else cr + 1
            else:
                # CR at the very end: a line ends here; a following LF belongs to it.
                end, nxt = cr, cr + 1
                self._pending_cr = True
            self._line(buf[start:end], events)
            start = nxt
        self._buf = buf[start:]
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: check for a truncated UTF-8 character. An unterminated event is
        discarded, as the spec says; ``pending`` tells the caller whether one was cut off."""
        self._utf8.decode(b"", final=True)
        return []

    @property
    def pending(self) -> bool:
        """True when bytes of an incomplete line or event are buffered (stream cut mid-event)."""
        return bool(self._buf) or bool(self._data) or bool(self._event)

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[0] == ":":
            self.comments += 1
            return
        colon = line.find(":")
        if colon < 0:
            name, value = line, ""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value.startswith(" "):
                value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        elif name == "error":
            # Not a WHATWG field: llama.cpp's server reports stream errors as `error: {json}`.
            # Dropping it (as the spec would) turns an engine error into a silent short
            # stream, so it becomes an event named "error" that adapters classify.
            self._data.append(value)
            self._event = "error"
        # other field names are ignored, per spec

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if not self._data:
            self._event = ""
            return
        events.append(SSEEvent("\n".join(self._data), self._event or "message", self._last_id, self._retry))
        self._data = []
        self._event = ""


class NDJSONDecoder:
    """Newline-delimited JSON framing (Ollama): each non-empty line is one message."""

    __slots__ = ("_utf8", "_buf")

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._buf = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        text = self._buf + self._utf8.decode(chunk)
        lines = text.split("\n")
        self._buf = lines.pop()
        return [SSEEvent(line.rstrip("\r")) for line in lines if line.strip()]

    def close(self) -> list[SSEEvent]:
        """End of stream: a last line without its newline is still a message."""
        self._buf += self._utf8.decode(b"", final=True)
        last, self._buf = self._buf.strip(), ""
        return [SSEEvent(last)] if last else []

    @property
    def pending(self) -> bool:
        return bool(self._buf.strip())


class FastSSEDecoder:
    """SSEDecoder with a fast path for what engines send: events of a single
    ``data: `` line ended by LF LF. Anything else — CR line ends, comments, ``event:``/``id:``
    fields, multi-line data, a BOM — goes to the full WHATWG decoder, event by event (CR: for
    the rest of the stream), so the results are the same; only the cost differs.

    Bytes are split into events before UTF-8 decoding, so a character split across reads
    is decoded whole; invalid UTF-8 raises UnicodeDecodeError when its event completes.
    """

    __slots__ = ("_full", "_tail", "_slow", "_started")

    def __init__(self) -> None:
        self._full = SSEDecoder()
        self._tail = b""
        self._slow = False
        self._started = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._slow:
            return self._full.feed(chunk)
        buf = self._tail + chunk if self._tail else chunk
        if not self._started and buf:
            self._started = True
            if buf[:1] == b"\xef":  # maybe a BOM: the full decoder knows the rules
                return self._go_slow(buf)
            self._full.feed(b"\n")  # a no-op blank line that marks its BOM check as done
        if b"\r" in buf:
            return self._go_slow(buf)
        if buf[:6] == b"data: " and buf[-2:] == b"\n\n" and buf.find(b"\n", 6) == len(buf) - 2:
            self._tail = b""  # one whole single-line event: the common read
            return [SSEEvent(buf[6:-2].decode("utf-8"))]
        parts = buf.split(b"\n\n")
        self._tail = parts.pop()
        events: list[SSEEvent] = []
        for part in parts:
            if part.startswith(b"data: ") and b"\n" not in part:
                events.append(SSEEvent(part[6:].decode("utf-8")))
            elif part:
                events.extend(self._full.feed(part + b"\n\n"))
        return events

    def _go_slow(self, buf: bytes) -> list[SSEEvent]:
        self._slow, self._tail = True, b""
        return self._full.feed(buf)

    def close(self) -> list[SSEEvent]:
        if self._tail:
            tail, self._tail = self._tail, b""
            self._full.feed(tail)
        return self._full.close()

    @property
    def pending(self) -> bool:
        return bool(self._tail) or self._full.pending
