"""A minimal HTTP/1.1 client made for timing streams: it hands back body bytes as each read
returns, with the read's arrival time, and tells a clean end from a cut connection.

Why not Locust's FastHttpSession: its line iterator reads 1 KiB blocks before splitting, which
delayed events by ~30 ms at 10 ms/token on this machine when this client was written (today's
accuracy: docs/performance.md, "Client"), and its readline waits for CRLF where SSE may end
lines with LF alone. Under Locust the `socket` module is gevent's,
so this code cooperates with other virtual users without changes.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from loadkit.client.stamps import enable_kernel_timestamps, kernel_timestamps_wanted

if TYPE_CHECKING:
    from loadkit.client.tlsstream import TlsConn

MAX_HEADER_BYTES = 64 * 1024


class ConnectFailed(OSError):
    """The TCP connection could not be made (refused, unreachable, timed out)."""


class ProtocolError(ValueError):
    """The server's bytes are not valid HTTP/1.1 (bad status line, bad chunk size)."""


@dataclass(slots=True)
class Endpoint:
    host: str
    port: int
    base_path: str
    host_header: str
    # https:// targets: the client context their connections are made with; None = plain HTTP.
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def parse(cls, url: str, ssl_context: ssl.SSLContext | None = None) -> Endpoint:
        """``http://`` or ``https://`` URL; https uses ``ssl_context``, else this process's
        (``loadkit.client.tls.process_context``: the run's TLS options, or the system default)."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"only http:// and https:// targets are supported, got {url!r}")
        if not parts.hostname:
            raise ValueError(f"no host in URL {url!r}")
        context = None
        if parts.scheme == "https":
            from loadkit.client.tls import process_context

            context = ssl_context or process_context()
        port = parts.port or (443 if context is not None else 80)
        return cls(parts.hostname, port, parts.path.rstrip("/"), parts.netloc, context)

    @property
    def scheme(self) -> str:
        return "http" if self.ssl_context is None else "https"


@dataclass(slots=True)
class ResponseHead:
    status: int
    reason: str
    headers: dict[str, str]
    # Body bytes that arrived in the same reads as the head.
    leftover: bytes = b""
    keep_alive: bool = True
    # Arrival of the read that completed the head (and holds `leftover`), perf_counter ns,
    # and whether that read's data waited over the late mark in its socket (stamps.READS).
    t_arrival_ns: int | None = None
    arrival_late: bool = False


def encode_request(
    ep: Endpoint, method: str, path: str, headers: dict[str, str], body: bytes | None
) -> bytes:
    lines = [f"{method} {ep.base_path}{path} HTTP/1.1", f"Host: {ep.host_header}"]
    for name, value in headers.items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


def connect(ep: Endpoint, timeout_s: float) -> socket.socket:
    try:
        sock = socket.create_connection((ep.host, ep.port), timeout=timeout_s)
    except OSError as exc:
        raise ConnectFailed(f"cannot connect to {ep.host}:{ep.port}: {exc}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if kernel_timestamps_wanted():
        enable_kernel_timestamps(sock)
    return sock


def parse_head(raw: bytes, leftover: bytes) -> ResponseHead:
    text = raw.decode("latin-1")
    status_line, _, rest = text.partition("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in rest.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    keep_alive = headers.get("connection", "").lower() != "close" and parts[0] != "HTTP/1.0"
    return ResponseHead(int(parts[1]), parts[2] if len(parts) > 2 else "", headers, leftover, keep_alive)


@dataclass(slots=True)
class BodyReader:
    """Turns raw reads into body bytes: chunked, Content-Length, or until close.

    `feed` returns the body bytes in `data`; `complete` becomes True at the terminating chunk
    (or when Content-Length bytes are in). A connection that closes before then was cut.
    """

    chunked: bool
    remaining: int | None  # Content-Length bytes still expected; None = read to close
    complete: bool = False
    _buf: bytes = b""
    _chunk_left: int = 0
    _state: str = "size"  # size | data | data_crlf | trailer

    @classmethod
    def for_head(cls, head: ResponseHead) -> BodyReader:
        if "chunked" in head.headers.get("transfer-encoding", "").lower():
            return cls(chunked=True, remaining=None)
        length = head.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise ProtocolError(f"bad Content-Length {length!r}")
            n = int(length)
            return cls(chunked=False, remaining=n, complete=n == 0)
        return cls(chunked=False, remaining=None)

    def feed(self, data: bytes) -> bytes:
        if not self.chunked:
            return self._feed_plain(data)
        if self._state == "size" and not self._buf:
            # What streaming servers write: one whole chunk per event, read whole. Its size
            # line has no extension and the chunk ends exactly at the read's end; anything
            # else (several chunks, a split, the last chunk) takes the general path below.
            nl = data.find(b"\r\n", 0, 10)
            if nl > 0 and data[-2:] == b"\r\n":
                try:
                    size = int(data[:nl], 16)
                except ValueError:
                    size = 0
                if size and len(data) == nl + size + 4:
                    return data[nl + 2 : -2]
        # One pass over the buffer by offset: re-slicing it per chunk was the costliest step
        # of the read path when a read holds many events (profiled).
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n:
            if self._state == "data":
                take = min(self._chunk_left, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._chunk_left -= take
                if self._chunk_left == 0:
                    self._state = "data_crlf"
                continue
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                if n - pos > 4096:
                    raise ProtocolError("chunk header line too long")
                break
            line, pos = buf[pos:nl], nl + 2
            if not self._on_line(line):
                break
        self._buf = buf[pos:]
        return out[0] if len(out) == 1 else b"".join(out)

    def _feed_plain(self, data: bytes) -> bytes:
        if self.remaining is None:
            return data
        data = data[: self.remaining]
        self.remaining -= len(data)
        self.complete = self.remaining == 0
        return data

    def _on_line(self, line: bytes) -> bool:
        if self._state == "data_crlf":
            if line:
                raise ProtocolError(f"missing CRLF after chunk data, got {line[:20]!r}")
            self._state = "size"
        elif self._state == "size":
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:
                self._state = "trailer"
            else:
                self._chunk_left, self._state = size, "data"
        elif self._state == "trailer" and not line:
            self.complete = True
            return False
        return True


# A kept-alive connection: its socket and, over TLS, its session (None for plain HTTP).
Connection = tuple[socket.socket, Any]


class ConnectionPool:
    """Keep-alive connections for one virtual user: one idle connection per endpoint at most."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int, bool], Connection] = {}

    @staticmethod
    def _key(ep: Endpoint) -> tuple[str, int, bool]:
        return ep.host, ep.port, ep.ssl_context is not None

    def take(self, ep: Endpoint) -> Connection | None:
        return self._idle.pop(self._key(ep), None)

    def give_back(self, ep: Endpoint, sock: socket.socket, tls: TlsConn | None = None) -> None:
        old = self._idle.pop(self._key(ep), None)
        if old is not None:
            old[0].close()
        self._idle[self._key(ep)] = (sock, tls)

    def close(self) -> None:
        for sock, _tls in self._idle.values():
            sock.close()
        self._idle.clear()
