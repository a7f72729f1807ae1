"""The stream timer: sends one request through an adapter and measures it into a RequestRecord.

Every read carries the arrival time of its newest byte: the kernel's receive timestamp
(SO_TIMESTAMPNS, mapped to the monotonic clock) where available, else the moment the read
returned, taken before any decoding; every event completed by that read gets that time.
Work done on a read (SSE framing, JSON) is therefore never charged to the events in it.
Exactly one outcome is set on every path out, including `cancelled` when the greenlet is
killed at test stop (GreenletExit is a BaseException, so it would otherwise slip past
`except Exception` and look like a short success), and `adapter_error` when the adapter's own
code raises (client/adaptererr.py).

Both read paths — the hub-queued one under gevent and the direct one elsewhere — come through
one ``reads.StampedReader``: the head, the framing, the decoding and the record below are
written once.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from loadkit import types as t
from loadkit.client.bodies import BodyDecoder, is_streamed
from loadkit.client.events import EventDecoder, StreamDone, adapter_failed
from loadkit.client.httpstream import (
    BodyReader,
    ConnectFailed,
    ConnectionPool,
    Endpoint,
    ProtocolError,
    ResponseHead,
    encode_request,
)
from loadkit.client.hubreads import maybe_poll
from loadkit.client.reads import Reads, StampedReader, open_reader, read_head
from loadkit.client.stamps import kernel_timestamps_wanted
from loadkit.client.streamend import END_MARKER
from loadkit.client.tls import TlsError, refused_after_handshake_reason
from loadkit.client.tlsstream import TlsConn, open_connection, recv_body
from loadkit.core.adapter import EngineAdapter
from loadkit.records import RequestRecord

MAX_ERROR_BODY = 64 * 1024


@dataclass(slots=True)
class Timeouts:
    """Limits. `first_token_s` bounds the wait for the first token and `total_s` the whole
    request, both from t_send (once the request is written); `connect_s` the TCP connect
    alone, `handshake_s` the TLS handshake alone. A kind answered in one body (embeddings,
    rerank) has no first token: only `total_s` bounds its wait (a server still computing a
    large batch is not late to a first token it will never send)."""

    connect_s: float = 10.0
    first_token_s: float = 120.0
    total_s: float = 600.0
    handshake_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("connect_s", "first_token_s", "total_s", "handshake_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"timeout {name} must be > 0")


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header's delay in seconds (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def new_request_id() -> str:
    return uuid.uuid4().hex


def new_record(
    adapter: EngineAdapter, engine: str, request: t.GenerationRequest, request_id: str
) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        engine=engine,
        adapter=adapter.name,
        label=request.label,
        t_sched_ns=request.t_sched_ns,
        n_in_target=request.n_in_target,
        expected_cached_tokens=request.expected_cached_tokens,
        expected_reasoning_tokens=request.expected_reasoning_tokens,
        max_tokens=request.max_tokens,
        session_id=request.session_id,
        turn=request.turn,
        stage=request.stage,
        image_count=request.image_count,
        image_pixels=request.image_pixels,
        image_tokens_expected=request.image_tokens_expected,
        kind=request.kind,
        n_items=request.n_items,
    )


def run_request(
    adapter: EngineAdapter,
    base_url: str | Endpoint,
    request: t.GenerationRequest,
    *,
    engine: str | None = None,
    request_id: str | None = None,
    timeouts: Timeouts | None = None,
    pool: ConnectionPool | None = None,
    extra_headers: dict[str, str] | None = None,
    sink: Callable[[RequestRecord], None] | None = None,
) -> RequestRecord:
    """Send `request` to the target at `base_url` and measure it.

    Never raises for anything the server does. A BaseException (GreenletExit at test stop,
    KeyboardInterrupt) is re-raised after the record is marked `cancelled`; pass `sink` to
    receive the record on every path, that one included, so nothing measured is lost.
    """
    ep = base_url if isinstance(base_url, Endpoint) else Endpoint.parse(base_url)
    rid = request_id or new_request_id()
    record = new_record(adapter, engine or adapter.name, request, rid)
    try:
        StreamRun(adapter, ep, record, timeouts or Timeouts(), pool, request).run(request, extra_headers)
    finally:
        if sink is not None:
            sink(record)
        maybe_poll()  # the sink (stats, Locust events) and the caller's next request are work
    return record


class StreamRun:
    """One request's life: connect, send, read the head, read the stream, classify."""

    def __init__(
        self,
        adapter: EngineAdapter,
        ep: Endpoint,
        record: RequestRecord,
        timeouts: Timeouts,
        pool: ConnectionPool | None,
        request: t.GenerationRequest | None = None,
    ) -> None:
        self.adapter, self.ep, self.record, self.timeouts, self.pool = adapter, ep, record, timeouts, pool
        self.sock: socket.socket | None = None
        self.tls: TlsConn | None = None  # the TLS session of https:// connections
        self.reusable = False
        # A kind answered in one body (embeddings, rerank, a plugin's) is read whole and parsed
        # once (client/bodies.py); a stream event by event. Chosen once, off the per-read path.
        self.streamed = request is None or is_streamed(request.kind)
        self.events: EventDecoder | BodyDecoder = (
            BodyDecoder(adapter, record, request)
            if request is not None and not self.streamed
            else EventDecoder(adapter, record)
        )
        self.kernel = kernel_timestamps_wanted()
        # Set up before the request is written (see reads.open_reader); None when not reading.
        self.reader: StampedReader | None = None
        self.pending: Reads = []  # reads taken with the head's, after it

    def run(self, request: t.GenerationRequest, extra_headers: dict[str, str] | None) -> None:
        rec = self.record
        try:
            payload = self._payload(request, extra_headers)
            # t_send moves to the write (after any connect and handshake); a request that never
            # gets written keeps the time its attempt started.
            rec.t_start_ns = rec.t_send_ns = time.perf_counter_ns()
            self._exchange(payload)
        except StreamDone as done:
            rec.outcome, rec.error, rec.traceback = done.outcome, done.error, done.traceback
            if not rec.t_send_ns:  # the adapter failed before anything was sent
                rec.t_start_ns = rec.t_send_ns = time.perf_counter_ns()
        except BaseException as exc:
            rec.outcome, rec.error = t.CANCELLED, f"cancelled: {type(exc).__name__}"
            self._finish()
            raise
        self._finish()

    def _payload(self, request: t.GenerationRequest, extra_headers: dict[str, str] | None) -> bytes:
        """The request's bytes; the adapter's set-up or build_request raising is its outcome."""
        if self.events.failed is not None:
            raise self.events.failed
        try:
            http = self.adapter.build_request(request)
        except Exception as exc:
            raise adapter_failed(self.adapter, "build_request", exc) from None
        headers = dict(http.headers)
        if not self.streamed:
            headers["Accept"] = "application/json"
        headers.update(extra_headers or {})
        if request.reasoning_hint and request.expected_reasoning_tokens is not None:
            headers[t.REASONING_HINT_HEADER] = str(request.expected_reasoning_tokens)
        headers["X-Request-ID"] = self.record.request_id
        return encode_request(self.ep, http.method, http.path, headers, http.body)

    def _finish(self) -> None:
        rec = self.record
        if rec.t_end_ns is None:
            rec.t_end_ns = time.perf_counter_ns()
        self._close_reader()
        self.events.finish()
        if self.sock is not None:
            if self.reusable and self.pool is not None:
                self.pool.give_back(self.ep, self.sock, self.tls)
            else:
                self.sock.close()
            self.sock = self.tls = None

    def _close_reader(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def _deadline(self) -> int:
        """The nearest limit now in force: first token until it arrives, then the total (a
        non-streamed answer: the total alone)."""
        rec = self.record
        total = rec.t_send_ns + int(self.timeouts.total_s * 1e9)
        if rec.event_t_ns or not self.streamed:
            return total
        return min(total, rec.t_send_ns + int(self.timeouts.first_token_s * 1e9))

    def _timeout_outcome(self) -> StreamDone:
        rec = self.record
        if not self.streamed:
            return StreamDone(t.TIMEOUT_TOTAL, f"no answer within {self.timeouts.total_s:g} s")
        now = time.perf_counter_ns()
        if not rec.event_t_ns and now < rec.t_send_ns + int(self.timeouts.total_s * 1e9):
            return StreamDone(t.TIMEOUT_FIRST_TOKEN, f"no token within {self.timeouts.first_token_s:g} s")
        if not rec.event_t_ns:
            return StreamDone(t.TIMEOUT_FIRST_TOKEN, f"no token within {self.timeouts.total_s:g} s")
        return StreamDone(t.TIMEOUT_TOTAL, f"request not finished within {self.timeouts.total_s:g} s")

    def _exchange(self, payload: bytes) -> None:
        head = self._send(payload)
        rec = self.record
        rec.t_headers_ns = head.t_arrival_ns or time.perf_counter_ns()
        if rec.t_sent_ns is not None and rec.t_sent_ns > rec.t_headers_ns:
            # The kernel stamped the answer before our clock read after sendall: the gap is this
            # process being scheduled late, not the upload, so the send ends at the answer at most.
            rec.t_sent_ns = rec.t_headers_ns
        rec.http_status = head.status
        body = BodyReader.for_head(head)
        if isinstance(self.events, BodyDecoder):
            self.events.headers = head.headers
        if head.status != 200:
            self._plain_reads(head)
            rec.retry_after_s = retry_after_seconds(head.headers.get("retry-after"))
            raise StreamDone(t.http_error(head.status), self._error_body(head, body))
        try:
            self._stream(head, body)
        except TimeoutError:
            raise self._timeout_outcome() from None
        except TlsError as exc:
            raise StreamDone(t.TLS_ERROR, f"mid-stream: {exc}") from None
        except (ConnectionError, OSError) as exc:
            raise StreamDone(t.DISCONNECTED, f"connection lost mid-stream: {exc}") from None
        except ProtocolError as exc:
            raise StreamDone(t.MALFORMED_STREAM, f"bad HTTP framing: {exc}") from None

    def _send(self, payload: bytes) -> ResponseHead:
        for attempt in (0, 1):
            conn = self.pool.take(self.ep) if (self.pool is not None and attempt == 0) else None
            reused = conn is not None
            try:
                return self._send_on(conn, payload)
            except ConnectFailed as exc:
                raise StreamDone(t.CONNECT_ERROR, str(exc)) from None
            except TlsError as exc:
                raise StreamDone(t.TLS_ERROR, str(exc)) from None
            except TimeoutError:
                raise self._timeout_outcome() from None
            except ProtocolError as exc:
                raise StreamDone(t.MALFORMED_STREAM, f"bad HTTP response: {exc}") from None
            except OSError as exc:
                self._close_reader()
                refused = not reused and self.tls is not None and self.tls.refused_client()
                if self.sock is not None:
                    self.sock.close()
                self.sock = self.tls = None
                # A kept-alive socket the server already closed: retry once on a fresh one.
                if reused:
                    continue
                if refused:
                    raise StreamDone(t.TLS_ERROR, f"{refused_after_handshake_reason()} ({exc})") from None
                raise StreamDone(t.DISCONNECTED, f"connection lost before the response: {exc}") from None
        raise AssertionError("unreachable")

    def _send_on(self, conn: tuple[socket.socket, TlsConn | None] | None, payload: bytes) -> ResponseHead:
        """Write the request on ``conn`` (a kept-alive connection) or a new one; read the head."""
        if conn is None:
            self._open()
        else:
            self.sock, self.tls = conn
        sock = self.sock
        assert sock is not None
        sock.settimeout(self.timeouts.connect_s)
        self.reader = open_reader(sock, self.kernel, self.tls)
        self._write(sock, payload)
        head, self.pending = read_head(self.reader, self._deadline())
        return head

    def _open(self) -> None:
        """A new connection; its TCP connect and TLS handshake are timed apart (connect_ms, tls_ms)."""
        connect_s = self.timeouts.connect_s
        if self.streamed:
            connect_s = min(connect_s, self.timeouts.first_token_s)
        self.sock, self.tls = open_connection(self.ep, self.record, connect_s, self.timeouts.handshake_s)

    def _write(self, sock: socket.socket, payload: bytes) -> None:
        """The request's bytes: t_send is taken here, once any connection set-up is done."""
        rec = self.record
        rec.t_send_ns = time.perf_counter_ns()
        rec.request_bytes = len(payload)
        if self.tls is None:
            sock.sendall(payload)
        else:
            self.tls.sendall(sock, payload)
        # Once per request, not per event: the upload's own time (send_ms in the raw log).
        rec.t_sent_ns = time.perf_counter_ns()

    def _plain_reads(self, head: ResponseHead) -> None:
        """Back to plain reads (error bodies): the reads taken after the head join its leftover."""
        self._close_reader()
        head.leftover += b"".join(data for _, data, _ in self.pending)
        self.pending = []

    def _error_body(self, head: ResponseHead, body: BodyReader) -> str:
        chunks = [body.feed(head.leftover)]
        size = len(chunks[0])
        try:
            while not body.complete and size < MAX_ERROR_BODY and self.sock is not None:
                self.sock.settimeout(2.0)
                data = recv_body(self.sock, self.tls)
                if not data:
                    break
                chunks.append(body.feed(data))
                size += len(chunks[-1])
        except (OSError, ProtocolError):
            pass
        self.reusable = body.complete and head.keep_alive
        text = b"".join(chunks).decode("utf-8", "replace").strip()
        return f"HTTP {head.status}: {text[:500]}"

    def _stream(self, head: ResponseHead, body: BodyReader) -> None:
        """The body, through the connection's reader (either read path), batch by batch."""
        reader = self.reader
        assert reader is not None
        t_head = self.record.t_headers_ns or time.perf_counter_ns()
        reads = ([(t_head, head.leftover, head.arrival_late)] if head.leftover else []) + self.pending
        self.pending = []
        feed, poll = self.events.feed, reader.poll
        armed_for: bool | None = None  # the deadline's phase: before (False) / after (True) the first token
        while True:
            for i, (t_read, data, late) in enumerate(reads):
                poll()
                if not data:
                    # Without a length or chunking, close is the normal end of the body.
                    self.events.close(not body.chunked and body.remaining is None, t_read)
                    return
                if feed(t_read, body.feed(data), late):
                    self.record.t_end_ns, self.record.end = t_read, END_MARKER
                    self._close_reader()
                    self._after_end(head, body, reads[i + 1 :])
                    return
                if body.complete:
                    self.events.close(True, t_read)
                    self.reusable = head.keep_alive
                    return
            if body.complete:  # an empty body (Content-Length: 0) needs no read
                self.events.close(True, t_head)
                self.reusable = head.keep_alive
                return
            has_tokens = bool(self.record.event_t_ns)
            if armed_for is not has_tokens:  # first pass, or the first token changed the limit
                armed_for = has_tokens
                reader.arm(self._deadline())
            if has_tokens and body.chunked:
                reader.streaming()
            reads = self._take(reader, body)

    def _take(self, reader: StampedReader, body: BodyReader) -> Reads:
        """The next reads; when a limit interrupts the wait, the reads already taken are
        decoded first so the record keeps every event that arrived in time."""
        try:
            return reader.take()
        except TimeoutError:
            for t_read, data, late in reader.take_nowait():
                if not data:
                    break
                if self.events.feed(t_read, body.feed(data), late):
                    # The end arrived in time; only its decoding was late.
                    self.record.t_end_ns, self.record.end = t_read, END_MARKER
                    raise StreamDone(t.OK) from None
            raise

    def _after_end(self, head: ResponseHead, body: BodyReader, rest: Reads) -> None:
        """The engine's end arrived: take the reads already made, then drain, for reuse."""
        try:
            for _, data, _ in rest:
                if not data:
                    return  # the server closed: not reusable
                body.feed(data)
        except ProtocolError:
            return
        self._drain(body)
        self.reusable = body.complete and head.keep_alive

    def _drain(self, body: BodyReader) -> None:
        """After the normal end, read the rest of the body (the terminating chunk) so the
        connection can be reused; bounded in time, and never an error for the request."""
        try:
            while not body.complete and self.sock is not None:
                self.sock.settimeout(1.0)
                data = recv_body(self.sock, self.tls)
                if not data:
                    return
                body.feed(data)
        except (OSError, ProtocolError):
            return
