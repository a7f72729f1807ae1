"""A minimal HTTP/1.1 client made for timing streams: it hands back body bytes as each read
returns, with the read's arrival time, and tells a clean end from a cut connection.

Why not Locust's FastHttpSession: its line iterator reads 1 KiB blocks before splitting, which
delayed events by ~30 ms at 10 ms/token on this machine (DESIGN.md §6), and its readline waits
for CRLF where SSE may end lines with LF alone. Under Locust the `socket` module is gevent's,
so this code cooperates with other virtual users without changes.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from loadkit.client.sse import SSEDecoder, SSEEvent

if TYPE_CHECKING:
    from loadkit.client.tlsstream import TlsConn

MAX_HEADER_BYTES = 64 * 1024
RECV_SIZE = 65536

# Linux values; Python's socket module does not export them. SCM_TIMESTAMPNS == SO_TIMESTAMPNS.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: tv_sec, tv_nsec
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)
_unpack_timespec = _TIMESPEC.unpack_from  # bound once: recv_stamped runs for every read
_SOL_SOCKET = socket.SOL_SOCKET
# Re-sample the wall/monotonic offset this often: NTP slews the wall clock slowly, so a
# second-old offset is off by well under a microsecond.
OFFSET_REFRESH_NS = 1_000_000_000


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
    # Arrival of the read that completed the head (and holds `leftover`), perf_counter ns.
    t_arrival_ns: int | None = None


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


def kernel_timestamps_wanted() -> bool:
    """Kernel receive timestamps are on unless LOADKIT_KERNEL_TIMESTAMPS=0 (benchmarks compare)."""
    return os.environ.get("LOADKIT_KERNEL_TIMESTAMPS", "1") != "0"


def enable_kernel_timestamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp each read with the arrival time of its newest data."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False  # not Linux, or not a socket that supports it: reads are stamped in user space
    return True


def kernel_timestamps_on(sock: socket.socket) -> bool:
    try:
        return bool(sock.getsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS))
    except OSError:
        return False


class ArrivalClock:
    """Maps kernel receive stamps (CLOCK_REALTIME ns) onto ``time.perf_counter_ns()``.

    The offset comes from the tightest of a few (mono, wall, mono) reading triples and is
    refreshed every OFFSET_REFRESH_NS, so wall-clock steps and NTP slewing stay out of intervals.
    """

    __slots__ = ("_mono", "_wall", "_offset", "_next_refresh")

    def __init__(self, mono: Callable[[], int] = time.perf_counter_ns, wall: Callable[[], int] = time.time_ns) -> None:
        self._mono, self._wall = mono, wall
        self._offset = 0
        self._next_refresh = 0

    def sample_offset(self, tries: int = 5) -> int:
        """wall − mono from the tightest reading pair: its error is at most half the gap."""
        best_gap, best = None, 0
        for _ in range(tries):
            m1 = self._mono()
            w = self._wall()
            m2 = self._mono()
            if best_gap is None or m2 - m1 < best_gap:
                best_gap, best = m2 - m1, w - (m1 + m2) // 2
        return best

    def to_mono(self, wall_ns: int, now_mono: int) -> int:
        if now_mono >= self._next_refresh:
            self._offset = self.sample_offset()
            self._next_refresh = now_mono + OFFSET_REFRESH_NS
        return wall_ns - self._offset


ARRIVAL_CLOCK = ArrivalClock()


@dataclass(slots=True)
class ReadCounters:
    """Process-wide read statistics: how often the kernel stamp was used, how often a read
    held several token events (their earlier events carry the newest one's arrival time)."""

    reads: int = 0
    kernel_stamped: int = 0
    coalesced: int = 0
    # Kernel-stamped reads whose data waited in the socket longer than ``late_ns`` before the
    # client read it: the client's arrival-path lag, which the self-check reports.
    late: int = 0
    late_ns: int = 5_000_000
    # Requests whose first token arrived, and those whose first token's read held more than
    # one token event (their TTFT is late by up to an interval): TTFT's own coalescing rate,
    # which a read-level rate hides (one first read in 256).
    firsts: int = 0
    first_coalesced: int = 0


READS = ReadCounters()


def recv_stamped(sock: socket.socket, kernel: bool, buf: memoryview | None = None) -> tuple[bytes, int]:
    """One read and the arrival time of its newest byte (perf_counter ns).

    With kernel stamps the time is the kernel's, mapped to the monotonic clock and capped at
    the user-space read time; otherwise (or when no stamp came back) the time the read returned.

    ``buf``: a reusable receive buffer, for callers that can never run two reads at once (the
    gevent hub's read callbacks). Reading into it and copying out the few hundred bytes that
    came avoids a 64 KiB allocation shrunk to size per read, which fragmented glibc's heap
    enough to grow a long run's RSS (docs/performance.md, Soak).
    """
    READS.reads += 1
    if buf is not None:
        if not kernel:
            n = sock.recv_into(buf)
            return buf[:n].tobytes(), time.perf_counter_ns()
        n, anc, _flags, _addr = sock.recvmsg_into((buf,), _ANC_SIZE)
        data = buf[:n].tobytes()
    elif not kernel:
        data = sock.recv(RECV_SIZE)
        return data, time.perf_counter_ns()
    else:
        data, anc, _flags, _addr = sock.recvmsg(RECV_SIZE, _ANC_SIZE)
    t_user = time.perf_counter_ns()
    for level, kind, raw in anc:
        if kind == SCM_TIMESTAMPNS and level == _SOL_SOCKET and len(raw) >= 16:
            sec, nsec = _unpack_timespec(raw)
            READS.kernel_stamped += 1
            t_kernel = ARRIVAL_CLOCK.to_mono(sec * 1_000_000_000 + nsec, t_user)
            if t_kernel >= t_user:
                return data, t_user
            if t_user - t_kernel > READS.late_ns:
                READS.late += 1
            return data, t_kernel
    return data, t_user


def read_head(sock: socket.socket, deadline_ns: int, kernel: bool = False, tls: TlsConn | None = None) -> ResponseHead:
    recv = recv_stamped if tls is None else tls.recv_stamped
    buf = b""
    t_read: int | None = None
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = parse_head(buf[:end], buf[end + 4 :])
            head.t_arrival_ns = t_read
            return head
        if len(buf) > MAX_HEADER_BYTES:
            raise ProtocolError(f"response head longer than {MAX_HEADER_BYTES} bytes")
        set_deadline(sock, deadline_ns)
        data, t_read = recv(sock, kernel)
        if not data:
            raise ConnectionResetError("connection closed before the response head was complete")
        buf += data


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


def set_deadline(sock: socket.socket, deadline_ns: int) -> None:
    remaining = (deadline_ns - time.perf_counter_ns()) / 1e9
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    sock.settimeout(remaining)


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


class FastSSEDecoder:
    """loadkit.client.sse.SSEDecoder with a fast path for what engines send: events of a single
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
