"""A loopback HTTP server that plays a script of (delay, bytes) writes and records when it
wrote each piece (time.monotonic_ns, the clock loadkit's perf_counter_ns reads on Linux).

Used where the test must control every byte and every gap: framing edge cases, faults, and
timing truth for the stream timer.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Script:
    head: bytes = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    # (seconds to wait before writing, raw bytes to write)
    writes: list[tuple[float, bytes]] = field(default_factory=list)
    close: bool = True


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


END_CHUNK = b"0\r\n\r\n"


class ScriptedServer:
    """``tls``: serve https with this server context, the handshake begun ``handshake_delay_s``
    after the connection is accepted (to tell set-up time from TTFT)."""

    def __init__(self, script_for_request, tls=None, handshake_delay_s: float = 0.0) -> None:
        self.script_for_request = script_for_request
        self.tls, self.handshake_delay_s = tls, handshake_delay_s
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.write_times: list[list[int]] = []
        self.requests: list[bytes] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> bytes:
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return buf
            buf += data
        head, _, body = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def _handle(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            time.sleep(self.handshake_delay_s)
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused us, or we refused it: the test looks at its side
                conn.close()
                return
        with conn:
            while True:
                req = self._read_request(conn)
                if not req:
                    return
                self.requests.append(req)
                script = self.script_for_request(req)
                times: list[int] = []
                self.write_times.append(times)
                conn.sendall(script.head)
                try:
                    for delay, data in script.writes:
                        if delay:
                            time.sleep(delay)
                        times.append(time.monotonic_ns())
                        conn.sendall(data)
                except OSError:
                    return
                if script.close:
                    return


class ScriptedServerProcess:
    """The same server in a forked process, so its writes do not wait on the test's GIL:
    timing tests compare against write times that are not skewed by the client under test."""

    def __init__(self, script: Script | Callable[[bytes], Script], tls=None) -> None:
        """``script``: one Script for every request, or a function of the request (as for
        ScriptedServer); ``tls``: a server-side SSLContext for https."""
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self._times = ctx.Queue()
        self._ready = ctx.Queue()
        self.script = script
        self.tls = tls
        self._proc = ctx.Process(target=self._main, daemon=True)

    def _main(self) -> None:
        script = self.script
        srv = ScriptedServer(script if callable(script) else lambda _req: script, self.tls)
        original = srv._handle

        def handle(conn):
            original(conn)
            for times in srv.write_times:
                self._times.put(times)
            srv.write_times.clear()

        srv._handle = handle
        srv._thread.start()
        self._ready.put(srv.port)
        srv._thread.join()

    def __enter__(self) -> ScriptedServerProcess:
        self._proc.start()
        self.port = self._ready.get(timeout=10)
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The server dies at once: the kernel closes its sockets (in-flight streams are cut,
        new connections refused)."""
        os.kill(self._proc.pid, sig)

    def write_times(self, timeout: float = 5.0) -> list[int]:
        return self._times.get(timeout=timeout)

    def __exit__(self, *exc) -> None:
        self._proc.kill()
        self._proc.join(5)
