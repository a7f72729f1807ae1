"""A minimal HTTP/1.1 server connection on an asyncio Protocol.

Why not a framework: every byte and every fault must be under control (a stream may be cut
mid-chunk, trickled, or stalled) and per-event cost must stay at a few microseconds.

Supported: keep-alive (HTTP/1.1 default, ``Connection: close`` honoured), request bodies with
``Content-Length`` (``Expect: 100-continue`` answered), responses with ``Content-Length`` or
chunked transfer encoding, one request at a time per connection (pipelined requests wait in
the buffer). Not supported: chunked request bodies (411), HTTP/2.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024

REASONS = {
    200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    411: "Length Required", 413: "Payload Too Large", 422: "Unprocessable Entity",
    429: "Too Many Requests", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}  # fmt: skip


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class HttpConnection(asyncio.Protocol):
    """One client connection; ``handler(request, connection)`` answers each request."""

    def __init__(
        self,
        handler: Callable[[Request, HttpConnection], None],
        server_header: bytes,
        sndbuf: int | None = None,
    ) -> None:
        self.handler = handler
        self.sndbuf = sndbuf
        self.server_header = server_header
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False  # a response is in progress
        self.keep_alive = True
        self.closed = False
        self.paused = False
        self.continued = False  # "100 Continue" sent for the request being read
        self.on_lost: Callable[[], None] | None = None
        self.on_resume: Callable[[], None] | None = None

    # ---- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.sndbuf:  # a small kernel buffer makes a slow client push back sooner
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.on_lost is not None:
            callback, self.on_lost = self.on_lost, None
            callback()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.on_resume is not None:
            self.on_resume()

    # ---- requests ------------------------------------------------------------------------

    def _next_request(self) -> None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                self._fail(431, "request head too large")
            return
        try:
            method, target, headers = parse_head(bytes(self.buf[:end]))
        except ValueError as exc:
            self._fail(400, str(exc))
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._fail(411, "chunked request bodies are not supported; send Content-Length")
            return
        length = _content_length(headers)
        if length is None or length > MAX_BODY:
            self._fail(400 if length is None else 413, "bad Content-Length")
            return
        if len(self.buf) < end + 4 + length:
            if headers.get("expect", "").lower() == "100-continue" and not self.continued:
                self.continued = True  # curl waits 1 s for this before sending a large body
                self.write_raw(b"HTTP/1.1 100 Continue\r\n\r\n")
            return  # wait for the rest of the body
        self.continued = False
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        self._dispatch(method, target, headers, body)

    def _dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        path, _, query = target.partition("?")
        conn_hdr = headers.get("connection", "").lower()
        self.keep_alive = "close" not in conn_hdr
        self.busy = True
        try:
            self.handler(Request(method, path, query, headers, body, self.keep_alive), self)
        except Exception:  # a simulator bug must not take the server down: log it, answer 500
            traceback.print_exc(file=sys.stderr)
            if self.busy:
                self.keep_alive = False
                self.respond(500, b'{"error":"internal simulator error"}')

    def _fail(self, status: int, message: str) -> None:
        self.keep_alive = False
        self.busy = True
        self.respond(status, message.encode() + b"\n", content_type="text/plain; charset=utf-8")

    # ---- responses -----------------------------------------------------------------------

    def _head(self, status: int, headers: dict[str, str], framing: bytes) -> bytes:
        lines = [
            b"HTTP/1.1 %d %s\r\nServer: %s\r\n"
            % (status, REASONS.get(status, "Unknown").encode(), self.server_header)
        ]
        lines += [b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers.items()]
        if not self.keep_alive:
            lines.append(b"Connection: close\r\n")
        lines.append(framing + b"\r\n")
        return b"".join(lines)

    def respond(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        """A whole response with Content-Length; then the connection takes the next request."""
        hdrs = {"Content-Type": content_type, **(headers or {})}
        if self.transport is not None and not self.closed:
            self.transport.write(self._head(status, hdrs, b"Content-Length: %d\r\n" % len(body)) + body)
        self._done()

    def start_stream(self, status: int, content_type: str, headers: dict[str, str] | None = None) -> None:
        hdrs = {"Content-Type": content_type, "Cache-Control": "no-cache", **(headers or {})}
        if self.transport is not None and not self.closed:
            self.transport.write(self._head(status, hdrs, b"Transfer-Encoding: chunked\r\n"))

    def write_chunk(self, data: bytes) -> None:
        if data and self.transport is not None and not self.closed:
            self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def write_raw(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def end_stream(self, last: bytes = b"") -> None:
        """Write the last chunk (if any) and the terminating zero-length chunk."""
        if self.transport is not None and not self.closed:
            head = b"%x\r\n%s\r\n" % (len(last), last) if last else b""
            self.transport.write(head + b"0\r\n\r\n")
        self._done()

    def abort(self) -> None:
        """Cut the connection at once, without flushing (a mid-stream drop)."""
        self.keep_alive = False
        if self.transport is not None and not self.closed:
            self.transport.abort()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _done(self) -> None:
        self.busy = False
        self.on_lost = None
        self.on_resume = None
        if not self.keep_alive:
            self.close()
        elif self.buf:
            asyncio.get_running_loop().call_soon(self._resume_parsing)

    def _resume_parsing(self) -> None:
        if not self.busy and not self.closed:
            self._next_request()


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """Request line and headers; header names lower-cased. ValueError if malformed."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"bad request line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"bad header line {line[:80]!r}")
        headers[name.lower()] = value.strip()
    return parts[0], parts[1], headers


def _content_length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length", "0")
    return int(raw) if raw.isdigit() else None
