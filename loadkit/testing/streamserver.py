"""A loopback HTTP server that streams recorded events one by one and logs when it sent each.

    with stream_server({("POST", "/v1/messages"): Stream(events, gap_s=0.005)}) as server:
        record = run_request(adapter, server.url, request)
        server.sent[0]          # perf_counter_ns just before each event was written

Every accepted socket gets ``TCP_NODELAY``. Without it (Python's ``http.server`` default)
Nagle's algorithm holds a small write back until the previous one is acknowledged, and the
client's delayed ACK makes that wait up to ~40 ms: a test server built that way inflates the
TTFT and ITL a client measures by 15-25 ms while the client is right. ``gap_s`` spaces the
events so each arrives in its own read, which is what per-event timing tests need.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

End = Literal["chunked", "close", "abort"]


@dataclass
class Stream:
    """One answer: ``events`` written one per HTTP chunk, ``gap_s`` apart (the first after ``gap_s``).

    ``end``: ``"chunked"`` ends the body properly, ``"close"`` closes the connection after the
    last event without the terminating chunk (a server that dies cleanly mid-body), ``"abort"``
    resets it (RST). A plain answer is a Stream with one event and ``stream=False``.
    """

    events: Sequence[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    gap_s: float = 0.0
    end: End = "chunked"
    stream: bool = True
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StreamServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(Seen(self.command, self.path, dict(self.headers), body))
        answer = self.server.routes.get((self.command, self.path)) or Stream(
            [b'{"error": "not found"}'], 404, "application/json", stream=False
        )
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        if answer.stream:
            self._stream(answer)
        else:
            payload = b"".join(answer.events)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    def _stream(self, answer: Stream) -> None:
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        stamps: list[int] = []
        self.server.sent.append(stamps)
        for event in answer.events:
            if answer.gap_s:
                time.sleep(answer.gap_s)
            stamps.append(time.perf_counter_ns())
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        if answer.end == "chunked":
            self.wfile.write(b"0\r\n\r\n")
            return
        self.close_connection = True
        if answer.end == "abort":  # SO_LINGER 0: close sends RST, the client sees a reset
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    do_GET = do_POST = _answer


class StreamServer(ThreadingHTTPServer):
    """Serves ``routes`` on 127.0.0.1:``port`` (0, the default: a free port the kernel picks;
    ``url`` says which). A fixed port is for a client that must be told the address before
    the server exists (a config file, another process); a port in use raises ``OSError``."""

    daemon_threads = True

    def __init__(self, routes: dict[tuple[str, str], Stream], port: int = 0) -> None:
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"StreamServer: port must be an integer from 0 to 65535, got {port!r}")
        try:
            super().__init__(("127.0.0.1", port), _Handler)
        except OSError as exc:  # say which port: the bare "Address already in use" does not
            raise OSError(
                exc.errno, f"StreamServer: cannot listen on 127.0.0.1:{port}: {exc.strerror}"
            ) from exc
        self.routes = routes
        self.seen: list[Seen] = []
        self.sent: list[list[int]] = []  # per streamed answer: perf_counter_ns before each event

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client left mid-answer (a cancelled or failed request): expected here
        super().handle_error(request, client_address)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def stream_server(routes: dict[tuple[str, str], Stream], port: int = 0) -> Iterator[StreamServer]:
    """Serve ``routes`` ((method, path) -> Stream) on loopback ``port`` (0: a free one) in a thread."""
    server = StreamServer(routes, port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
