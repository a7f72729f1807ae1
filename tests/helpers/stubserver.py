"""A tiny loopback HTTP server for tests: fixed answers per (method, path), streamed either
chunked (split into small chunks) or close-delimited. Requests are recorded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    chunked: bool = False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, dict(self.headers), body))
        answer = self.server.routes.get((self.command, self.path))
        if answer is None:
            answer = Answer(b'{"detail":"Not Found"}', status=404)
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        if answer.chunked:
            self._chunked(answer.body)
        else:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(answer.body)
            self.close_connection = True

    def _chunked(self, body: bytes) -> None:
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 40):
            piece = body[i : i + 40]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: dict[tuple[str, str], Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []


@contextmanager
def stub_server(routes: dict[tuple[str, str], Answer]) -> Iterator[tuple[str, _Server]]:
    server = _Server(routes)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
