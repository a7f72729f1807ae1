"""TLS on the timed stream path, without giving up kernel receive timestamps.

The stream timer keeps reading the raw TCP socket itself (``recvmsg`` with SO_TIMESTAMPNS,
``stamps.recv_stamped``) and feeds the ciphertext into an ``ssl.SSLObject`` over memory
BIOs. Each read's plaintext — the TLS records that read completed — carries that read's
arrival time, so an event is stamped with the arrival of the segment that finished its
record, exactly as a plain read stamps the segment that holds it. A read that completes no
record (half a record, a session ticket) hands nothing on; its bytes wait in the BIO.

The handshake runs over the same BIO pair on the same socket (bounded by a timeout); writes
go through ``SSLObject.write`` and the outgoing BIO is flushed to the socket. Plain http://
connections never reach this module: the choice is made once per connection.
"""

from __future__ import annotations

import socket
import ssl
import time

from loadkit.client.httpstream import Endpoint, connect
from loadkit.client.hubreads import ArrivalQueue
from loadkit.client.stamps import READS, RECV_SIZE, recv_stamped
from loadkit.client.tls import TlsError, describe_error, refused_after_handshake_reason
from loadkit.records import RequestRecord


class TlsConn:
    """One TLS session over a TCP socket that loadkit reads itself (see the module docstring)."""

    __slots__ = ("obj", "_in", "_out", "host", "closed")

    def __init__(self, context: ssl.SSLContext, host: str) -> None:
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        # server_hostname: SNI, and the name the certificate is checked against.
        self.obj = context.wrap_bio(self._in, self._out, server_hostname=host)
        self.host = host
        self.closed = False  # the server's close_notify came

    def handshake(self, sock: socket.socket, timeout_s: float) -> None:
        """Run the handshake on ``sock``; TlsError with the reason on any failure."""
        deadline = time.perf_counter() + timeout_s
        while True:
            try:
                self.obj.do_handshake()
            except ssl.SSLWantReadError:
                self._flush(sock)
                self._handshake_read(sock, deadline, timeout_s)
                continue
            except ssl.SSLError as exc:
                self._flush_quietly(sock)  # the alert that tells the server why
                raise TlsError(describe_error(exc, self.host)) from None
            self._flush(sock)
            return

    def _handshake_read(self, sock: socket.socket, deadline: float, timeout_s: float) -> None:
        remaining = deadline - time.perf_counter()
        try:
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            data = sock.recv(RECV_SIZE)
        except TimeoutError:
            raise TlsError(
                f"handshake timeout: the TLS handshake did not finish within {timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise TlsError(f"connection lost during the TLS handshake: {exc}") from None
        if not data:
            raise TlsError("the server closed the connection during the TLS handshake")
        self._in.write(data)

    def sendall(self, sock: socket.socket, data: bytes) -> None:
        self.obj.write(data)
        self._flush(sock)

    def _flush(self, sock: socket.socket) -> None:
        # Also sends what reads left in the outgoing BIO (a TLS 1.3 KeyUpdate reply): reads
        # never write, so a hub callback cannot interleave bytes with a greenlet's sendall.
        out = self._out.read()
        if out:
            sock.sendall(out)

    def _flush_quietly(self, sock: socket.socket) -> None:
        try:
            self._flush(sock)
        except OSError:
            pass

    def decrypt(self, data: bytes) -> bytes | None:
        """The plaintext of the records ``data`` completed: b"" if none yet, None once the
        server's close_notify came with no data before it. TlsError on a TLS failure."""
        self._in.write(data)
        try:
            plain = self.obj.read(RECV_SIZE)
            if not self._in.pending:
                # The common read: one whole record (a streaming server writes one per event).
                if not plain:
                    self.closed = True
                    return None
                return plain
            return self._decrypt_rest(plain)
        except ssl.SSLWantReadError:
            return b""
        except ssl.SSLError as exc:
            raise TlsError(describe_error(exc, self.host)) from None

    def _decrypt_rest(self, first: bytes) -> bytes | None:
        """Several records, or a record and part of the next, in one read."""
        parts = [first]
        while first and self._in.pending:
            try:
                first = self.obj.read(RECV_SIZE)
            except ssl.SSLWantReadError:
                break
            parts.append(first)
        if not first:
            self.closed = True
        plain = b"".join(parts)
        return plain if plain or not self.closed else None

    def recv_stamped(self, sock: socket.socket, kernel: bool) -> tuple[bytes, int]:
        """``stamps.recv_stamped`` through TLS: plaintext and the arrival time of the read
        that completed it; b"" at the end (TCP close or close_notify). Blocking reads."""
        while not self.closed:
            data, t_read = recv_stamped(sock, kernel)
            plain = self.decrypt(data) if data else b""
            if plain is None or not data:
                return b"", t_read
            if plain:
                return plain, t_read  # close_notify behind it: the next call returns the end
        return b"", time.perf_counter_ns()

    def refused_client(self) -> bool:
        """A TLS 1.3 session that never got a session ticket: how a server that refuses the
        client certificate looks when its alert is lost to a reset (see tls.py)."""
        session = self.obj.session
        return self.obj.version() == "TLSv1.3" and (session is None or not session.has_ticket)


class TlsArrivalQueue(ArrivalQueue):
    """ArrivalQueue for a TLS connection: the hub reads and stamps ciphertext and queues the
    plaintext it completes, through the plain queue's own queueing (``_queue``)."""

    __slots__ = ("_tls",)

    def __init__(self, sock: socket.socket, kernel: bool, tls: TlsConn, flush_s: float = 1.0) -> None:
        self._tls = tls
        super().__init__(sock, kernel, flush_s)

    def _on_readable(self) -> None:
        try:
            data, t_read = recv_stamped(self._raw, self._kernel, self._buf)
            late = READS.last_late  # this read's: decryption below reads nothing
            if data:
                plain = self._tls.decrypt(data)
                if plain == b"":
                    return  # no record completed yet (or a session ticket): nothing to hand on
                data = plain or b""
        except BlockingIOError:
            return
        except OSError as exc:  # TlsError included
            self._fail(exc)
            return
        self._queue(t_read, data, late)
        if data and self._tls.closed:
            self._queue(t_read, b"")  # close_notify after the data: the end


def open_connection(ep: Endpoint, record: RequestRecord, connect_s: float,
                    handshake_s: float) -> tuple[socket.socket, TlsConn | None]:  # fmt: skip
    """A new connection for a timed request, its set-up stamped into ``record``: TCP connect
    began / done, TLS handshake done (https only). ConnectFailed, TlsError."""
    record.t_connect_ns = time.perf_counter_ns()
    sock = connect(ep, connect_s)
    record.t_connected_ns = time.perf_counter_ns()
    if ep.ssl_context is None:
        return sock, None
    tls = _handshake(sock, ep, handshake_s)
    record.t_tls_ns = time.perf_counter_ns()
    return sock, tls


def _handshake(sock: socket.socket, ep: Endpoint, handshake_s: float) -> TlsConn:
    """The TLS session on a fresh connection; the socket is closed if the handshake fails."""
    assert ep.ssl_context is not None
    tls = TlsConn(ep.ssl_context, ep.host)
    try:
        tls.handshake(sock, handshake_s)
    except BaseException:
        sock.close()
        raise
    return tls


def arrival_queue(sock: socket.socket, kernel: bool, tls: TlsConn | None) -> ArrivalQueue:
    """The hub-side reader of a connection: plain, or decrypting (chosen once per connection)."""
    return ArrivalQueue(sock, kernel) if tls is None else TlsArrivalQueue(sock, kernel, tls)


def recv_body(sock: socket.socket, tls: TlsConn | None) -> bytes:
    """One blocking read of body bytes off the timed path (error bodies, draining for reuse)."""
    return sock.recv(RECV_SIZE) if tls is None else tls.recv_stamped(sock, False)[0]


def open_tls(ep: Endpoint, timeout_s: float, handshake_s: float) -> tuple[socket.socket, TlsConn]:
    """A TCP connection and a finished handshake to ``ep`` (which must have a context)."""
    assert ep.ssl_context is not None
    sock = connect(ep, timeout_s)
    return sock, _handshake(sock, ep, handshake_s)


def check_tls(ep: Endpoint, timeout_s: float = 5.0, wait_s: float = 1.0) -> dict[str, str | None]:
    """The pre-flight check of an https:// target: connect and handshake, then wait up to
    ``wait_s`` for the server's first post-handshake bytes (TLS 1.3 servers send session
    tickets, or refuse a client certificate, right after the handshake). Returns what was
    negotiated; raises TlsError (or ConnectFailed) with the reason."""
    sock, tls = open_tls(ep, timeout_s, timeout_s)
    try:
        if tls.obj.version() == "TLSv1.3":
            _await_tickets(sock, tls, wait_s)
        cipher = tls.obj.cipher()
        return {"version": tls.obj.version(), "cipher": cipher[0] if cipher else None,
                "alpn": tls.obj.selected_alpn_protocol()}  # fmt: skip
    finally:
        sock.close()


def _await_tickets(sock: socket.socket, tls: TlsConn, wait_s: float) -> None:
    deadline = time.perf_counter() + wait_s
    while not tls.obj.session or not tls.obj.session.has_ticket:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return  # a server that sends no tickets: nothing more to learn without a request
        sock.settimeout(remaining)
        try:
            data = sock.recv(RECV_SIZE)
        except TimeoutError:
            return
        except OSError:
            data = b""
        if not data:
            raise TlsError(refused_after_handshake_reason())
        if tls.decrypt(data) is None:
            raise TlsError(refused_after_handshake_reason())
