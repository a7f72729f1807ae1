"""A tiny raw-socket HTTP/1.1 client for simulator tests (loadkit's own client is tested elsewhere).

It records when each body chunk arrived and whether the chunked body ended properly, so tests
can tell a clean end from a dropped connection.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    chunks: list[bytes] = field(default_factory=list)
    t_chunks_ns: list[int] = field(default_factory=list)
    complete: bool = False  # the zero-length terminating chunk (or full Content-Length) arrived
    reads: int = 0

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def sse_data(self) -> list[str]:
        """The ``data`` of each SSE event (``data:`` with or without a space)."""
        out = []
        for block in self.body.decode().split("\n\n"):
            for line in block.split("\n"):
                if line.startswith("data:"):
                    out.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        return out

    def json_events(self) -> list[Any]:
        return [json.loads(d) for d in self.sse_data() if d != "[DONE]"]

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 5.0,
    raw_body: bytes | None = None,
) -> RawResponse:
    data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else b"")
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(data)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(head.encode() + b"\r\n" + data)
        return _read_response(sock)


def _read_response(sock: socket.socket) -> RawResponse:
    buf = b""
    while b"\r\n\r\n" not in buf:
        more = sock.recv(65536)
        if not more:
            raise ConnectionError(f"closed before the response head: {buf!r}")
        buf += more
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    resp = RawResponse(int(lines[0].split(" ")[1]), headers)
    if "content-length" in headers:
        _read_length(sock, resp, rest, int(headers["content-length"]))
    else:
        _read_chunked(sock, resp, rest)
    return resp


def _read_length(sock: socket.socket, resp: RawResponse, rest: bytes, n: int) -> None:
    while len(rest) < n:
        more = sock.recv(65536)
        if not more:
            break
        rest += more
    resp.chunks, resp.t_chunks_ns, resp.complete = [rest[:n]], [time.monotonic_ns()], len(rest) >= n


def _read_chunked(sock: socket.socket, resp: RawResponse, buf: bytes) -> None:
    t = time.monotonic_ns()
    while True:
        parsed = _take_chunk(buf)
        if parsed is None:
            try:
                more = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                return
            if not more:
                return
            resp.reads += 1
            t, buf = time.monotonic_ns(), buf + more
            continue
        payload, buf = parsed
        if not payload:
            resp.complete = True
            return
        resp.chunks.append(payload)
        resp.t_chunks_ns.append(t)


def _take_chunk(buf: bytes) -> tuple[bytes, bytes] | None:
    line_end = buf.find(b"\r\n")
    if line_end < 0:
        return None
    size = int(buf[:line_end], 16)
    start = line_end + 2
    if len(buf) < start + size + 2:
        return None
    return buf[start : start + size], buf[start + size + 2 :]
