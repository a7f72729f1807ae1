"""The stream timer: sends one request through an adapter and measures it into a RequestRecord.

Every read carries the arrival time of its newest byte: the kernel's receive timestamp
(SO_TIMESTAMPNS, mapped to the monotonic clock) where available, else the moment the read
returned, taken before any decoding; every event completed by that read gets that time. Work done on a read (SSE framing, JSON) is therefore never
charged to the events in it. Exactly one outcome is set on every path out, including
`cancelled` when the greenlet is killed at test stop (GreenletExit is a BaseException, so it
would otherwise slip past `except Exception` and look like a short success).
"""

from __future__ import annotations

import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from loadkit import types as t
from loadkit.engines.base import EngineAdapter, StreamParser
from loadkit.engines.channels import ChannelMarks, apply_channels
from loadkit.httpstream import (
    READS,
    BodyReader,
    ConnectFailed,
    ConnectionPool,
    Endpoint,
    FastSSEDecoder,
    ProtocolError,
    ResponseHead,
    encode_request,
    kernel_timestamps_wanted,
    read_head,
    recv_stamped,
)
from loadkit.hubreads import ArrivalQueue, GeventDeadline, is_gevent_socket, maybe_poll, read_head_queued
from loadkit.records import RequestRecord
from loadkit.sse import NDJSONDecoder
from loadkit.streamend import END_CLOSE, END_MARKER, close_is_normal_end
from loadkit.tls import TlsError, refused_after_handshake_reason
from loadkit.tlsstream import TlsConn, arrival_queue, open_connection, recv_body

MAX_ERROR_BODY = 64 * 1024
# Reads an ArrivalQueue may hold before the greenlet decodes them (after the first token),
# drawn per batch from this range.
QUEUE_BATCH = (8, 40)


@dataclass(slots=True)
class Timeouts:
    """Limits. `first_token_s` bounds the wait for the first token and `total_s` the whole
    request, both from t_send (once the request is written); `connect_s` the TCP connect
    alone, `handshake_s` the TLS handshake alone."""

    connect_s: float = 10.0
    first_token_s: float = 120.0
    total_s: float = 600.0
    handshake_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("connect_s", "first_token_s", "total_s", "handshake_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"timeout {name} must be > 0")


class _StreamDone(Exception):
    """Internal: the request's outcome is decided."""

    def __init__(self, outcome: str, error: str | None = None) -> None:
        self.outcome, self.error = outcome, error


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
        max_tokens=request.max_tokens,
        session_id=request.session_id,
        turn=request.turn,
        stage=request.stage,
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
        StreamRun(adapter, ep, record, timeouts or Timeouts(), pool).run(request, extra_headers)
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
    ) -> None:
        self.adapter, self.ep, self.record, self.timeouts, self.pool = adapter, ep, record, timeouts, pool
        self.sock: socket.socket | None = None
        self.tls: TlsConn | None = None  # the TLS session of https:// connections
        self.reusable = False
        self.text_parts: list[str] = []
        self.tokens_from_events = 0
        self.kernel = kernel_timestamps_wanted()
        # Under gevent, set up before the request is sent: head and stream are read by the hub.
        self.queue: ArrivalQueue | None = None
        self.queued_reads: list[tuple[int, bytes]] = []
        self.marks: ChannelMarks | None = None  # the parser's reasoning/answer/tool-call marks

    def run(self, request: t.GenerationRequest, extra_headers: dict[str, str] | None) -> None:
        http = self.adapter.build_request(request)
        headers = dict(http.headers)
        headers.update(extra_headers or {})
        headers["X-Request-ID"] = self.record.request_id
        payload = encode_request(self.ep, http.method, http.path, headers, http.body)
        rec = self.record
        # t_send moves to the write (after any connect and handshake); a request that never
        # gets written keeps the time its attempt started.
        rec.t_start_ns = rec.t_send_ns = time.perf_counter_ns()
        try:
            self._exchange(payload)
        except _StreamDone as done:
            rec.outcome, rec.error = done.outcome, done.error
        except BaseException as exc:
            rec.outcome, rec.error = t.CANCELLED, f"cancelled: {type(exc).__name__}"
            self._finish()
            raise
        self._finish()

    def _finish(self) -> None:
        rec = self.record
        if rec.t_end_ns is None:
            rec.t_end_ns = time.perf_counter_ns()
        rec.text = "".join(self.text_parts)
        if self.queue is not None:
            self.queue.close()
            self.queue = None
        if rec.n_out is None and rec.event_t_ns:
            rec.n_out, rec.n_out_source = self.tokens_from_events, "events"
        if self.marks is not None:
            apply_channels(rec, self.marks)
        if self.sock is not None:
            if self.reusable and self.pool is not None:
                self.pool.give_back(self.ep, self.sock, self.tls)
            else:
                self.sock.close()
            self.sock = self.tls = None

    def _deadline(self) -> int:
        """The nearest limit now in force: first token until it arrives, then the total."""
        rec = self.record
        total = rec.t_send_ns + int(self.timeouts.total_s * 1e9)
        if rec.event_t_ns:
            return total
        return min(total, rec.t_send_ns + int(self.timeouts.first_token_s * 1e9))

    def _timeout_outcome(self) -> _StreamDone:
        rec = self.record
        now = time.perf_counter_ns()
        if not rec.event_t_ns and now < rec.t_send_ns + int(self.timeouts.total_s * 1e9):
            return _StreamDone(t.TIMEOUT_FIRST_TOKEN, f"no token within {self.timeouts.first_token_s:g} s")
        if not rec.event_t_ns:
            return _StreamDone(t.TIMEOUT_FIRST_TOKEN, f"no token within {self.timeouts.total_s:g} s")
        return _StreamDone(t.TIMEOUT_TOTAL, f"request not finished within {self.timeouts.total_s:g} s")

    def _exchange(self, payload: bytes) -> None:
        head = self._send(payload)
        rec = self.record
        rec.t_headers_ns = head.t_arrival_ns or time.perf_counter_ns()
        rec.http_status = head.status
        body = BodyReader.for_head(head)
        if head.status != 200:
            self._stop_queue(head)
            rec.retry_after_s = retry_after_seconds(head.headers.get("retry-after"))
            raise _StreamDone(t.http_error(head.status), self._error_body(head, body))
        try:
            self._stream(head, body)
        except TimeoutError:
            raise self._timeout_outcome() from None
        except TlsError as exc:
            raise _StreamDone(t.TLS_ERROR, f"mid-stream: {exc}") from None
        except (ConnectionError, OSError) as exc:
            raise _StreamDone(t.DISCONNECTED, f"connection lost mid-stream: {exc}") from None
        except ProtocolError as exc:
            raise _StreamDone(t.MALFORMED_STREAM, f"bad HTTP framing: {exc}") from None

    def _send(self, payload: bytes) -> ResponseHead:
        for attempt in (0, 1):
            conn = self.pool.take(self.ep) if (self.pool is not None and attempt == 0) else None
            reused = conn is not None
            try:
                if conn is None:
                    self._open()
                else:
                    self.sock, self.tls = conn
                sock = self.sock
                assert sock is not None
                sock.settimeout(self.timeouts.connect_s)
                if is_gevent_socket(sock) and ArrivalQueue.usable(sock):
                    return self._send_queued(sock, payload)
                self._write(sock, payload)
                return read_head(sock, self._deadline(), self.kernel, self.tls)
            except ConnectFailed as exc:
                raise _StreamDone(t.CONNECT_ERROR, str(exc)) from None
            except TlsError as exc:
                raise _StreamDone(t.TLS_ERROR, str(exc)) from None
            except TimeoutError:
                raise self._timeout_outcome() from None
            except ProtocolError as exc:
                raise _StreamDone(t.MALFORMED_STREAM, f"bad HTTP response: {exc}") from None
            except OSError as exc:
                self._stop_queue(None)
                refused = not reused and self.tls is not None and self.tls.refused_client()
                if self.sock is not None:
                    self.sock.close()
                self.sock = self.tls = None
                # A kept-alive socket the server already closed: retry once on a fresh one.
                if reused:
                    continue
                if refused:
                    raise _StreamDone(t.TLS_ERROR, f"{refused_after_handshake_reason()} ({exc})") from None
                raise _StreamDone(t.DISCONNECTED, f"connection lost before the response: {exc}") from None
        raise AssertionError("unreachable")

    def _open(self) -> None:
        """A new connection; its TCP connect and TLS handshake are timed apart (connect_ms, tls_ms)."""
        connect_s = min(self.timeouts.connect_s, self.timeouts.first_token_s)
        self.sock, self.tls = open_connection(self.ep, self.record, connect_s, self.timeouts.handshake_s)

    def _write(self, sock: socket.socket, payload: bytes) -> None:
        """The request's bytes: t_send is taken here, once any connection set-up is done."""
        self.record.t_send_ns = time.perf_counter_ns()
        if self.tls is None:
            sock.sendall(payload)
        else:
            self.tls.sendall(sock, payload)

    def _send_queued(self, sock: socket.socket, payload: bytes) -> ResponseHead:
        self.queue = arrival_queue(sock, self.kernel, self.tls)
        self._write(sock, payload)
        guard = GeventDeadline()
        try:
            head, self.queued_reads = read_head_queued(self.queue, guard, self._deadline())
        finally:
            guard.cancel()
        return head

    def _stop_queue(self, head: ResponseHead | None) -> None:
        """Back to plain reads (error bodies, retries): what the queue holds joins the head."""
        if self.queue is None:
            return
        self.queue.close()
        self.queue = None
        if head is not None:
            head.leftover += b"".join(data for _, data in self.queued_reads)
        self.queued_reads = []

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
        assert self.sock is not None
        guard = GeventDeadline() if is_gevent_socket(self.sock) else None
        if guard is not None:
            # Bounded by the guard's timer: a socket timeout would arm a new one per read.
            self.sock.settimeout(None)
        try:
            if guard is not None and (self.queue is not None or ArrivalQueue.usable(self.sock)):
                self._read_queued(head, body, guard)
            else:
                self._read_loop(head, body, guard)
        finally:
            if guard is not None:
                guard.cancel()

    def _read_loop(self, head: ResponseHead, body: BodyReader, guard: GeventDeadline | None) -> None:
        decoder = FastSSEDecoder() if self.adapter.framing == "sse" else NDJSONDecoder()
        parser = self._new_parser()
        data = head.leftover
        t_read = self.record.t_headers_ns or time.perf_counter_ns()
        armed_for: bool | None = None  # the guard's phase: before (False) / after (True) the first token
        recv = recv_stamped if self.tls is None else self.tls.recv_stamped  # per connection, not per read
        while True:
            if data and self._on_read(t_read, body.feed(data), decoder, parser):
                self.record.t_end_ns, self.record.end = t_read, END_MARKER
                if guard is not None:
                    guard.cancel()
                self._drain(body)
                self.reusable = body.complete and head.keep_alive
                return
            if body.complete:
                self._on_close(decoder, parser, True, t_read)
                self.reusable = head.keep_alive
                return
            assert self.sock is not None
            if guard is not None:
                has_tokens = bool(self.record.event_t_ns)
                if armed_for is not has_tokens:  # first pass, or the first token changed the limit
                    armed_for = has_tokens
                    guard.arm(self._deadline())
            else:
                self.sock.settimeout(max(1e-3, (self._deadline() - time.perf_counter_ns()) / 1e9))
            data, t_read = recv(self.sock, self.kernel)
            if not data:
                # Without a length or chunking, close is the normal end of the body.
                self._on_close(decoder, parser, not body.chunked and body.remaining is None, t_read)
                return

    def _read_queued(self, head: ResponseHead, body: BodyReader, guard: GeventDeadline) -> None:
        """The gevent path: reads arrive stamped from an ArrivalQueue, in batches."""
        assert self.sock is not None
        decoder = FastSSEDecoder() if self.adapter.framing == "sse" else NDJSONDecoder()
        parser = self._new_parser()
        t_head = self.record.t_headers_ns or time.perf_counter_ns()
        reads = ([(t_head, head.leftover)] if head.leftover else []) + self.queued_reads
        self.queued_reads = []
        queue = self.queue if self.queue is not None else arrival_queue(self.sock, self.kernel, self.tls)
        armed_for: bool | None = None  # the guard's phase: before (False) / after (True) the first token
        try:
            while True:
                for i, (t_read, data) in enumerate(reads):
                    maybe_poll()
                    if not data:
                        self._on_close(decoder, parser, not body.chunked and body.remaining is None, t_read)
                        return
                    if self._on_read(t_read, body.feed(data), decoder, parser):
                        self.record.t_end_ns, self.record.end = t_read, END_MARKER
                        queue.close()
                        guard.cancel()
                        self._after_end(head, body, reads[i + 1 :])
                        return
                    if body.complete:
                        self._on_close(decoder, parser, True, t_read)
                        self.reusable = head.keep_alive
                        return
                has_tokens = bool(self.record.event_t_ns)
                if armed_for is not has_tokens:  # first pass, or the first token changed the limit
                    armed_for = has_tokens
                    guard.arm(self._deadline())
                if has_tokens and body.chunked:
                    # After the first token decoding may wait for a batch of reads. Sizes vary so
                    # streams started together do not all decode in the same loop pass, which
                    # would leave every socket unread for that long.
                    queue.batch = random.randint(*QUEUE_BATCH)
                reads = self._take(queue, decoder, parser, body)
        finally:
            queue.close()

    def _take(self, queue: ArrivalQueue, decoder: FastSSEDecoder | NDJSONDecoder, parser: StreamParser,
              body: BodyReader) -> list[tuple[int, bytes]]:  # fmt: skip
        """The next reads; when a limit interrupts the wait, the reads already queued are
        decoded first so the record keeps every event that arrived in time."""
        try:
            return queue.take()
        except TimeoutError:
            for t_read, data in queue.take_nowait():
                if not data:
                    break
                if self._on_read(t_read, body.feed(data), decoder, parser):
                    # The end arrived in time; only its decoding was late.
                    self.record.t_end_ns, self.record.end = t_read, END_MARKER
                    raise _StreamDone(t.OK) from None
            raise

    def _after_end(self, head: ResponseHead, body: BodyReader, rest: list[tuple[int, bytes]]) -> None:
        """The engine's end arrived: take the reads already queued, then drain, for reuse."""
        try:
            for _, data in rest:
                if not data:
                    return  # the server closed: not reusable
                body.feed(data)
        except ProtocolError:
            return
        self._drain(body)
        self.reusable = body.complete and head.keep_alive

    def _new_parser(self) -> StreamParser:
        parser = self.adapter.new_parser()
        self.marks = parser.bind_channels(self.record.event_t_ns, self.adapter.options)
        return parser

    def _on_read(
        self, t_read: int, chunk: bytes, decoder: FastSSEDecoder | NDJSONDecoder, parser: StreamParser
    ) -> bool:
        """Handle the body bytes of one read; True once the engine's normal end arrived."""
        try:
            events = decoder.feed(chunk)
        except UnicodeDecodeError as exc:
            raise _StreamDone(t.MALFORMED_STREAM, f"invalid UTF-8 in stream: {exc}") from None
        # The per-event path, kept flat: it runs once for every token of every stream.
        rec = self.record
        event_t, event_k, texts = rec.event_t_ns, rec.event_tokens, self.text_parts
        first = not event_t
        token_events = 0
        done = False
        for ev in events:
            te = self._parse(parser, ev.data, ev.event)
            if te is None:
                continue
            if te.tokens > 0 or te.text or te.reasoning_text:
                token_events += 1
                k = te.tokens if te.tokens > 0 else 1
                event_t.append(t_read)
                event_k.append(k)
                self.tokens_from_events += k
                if te.text:
                    texts.append(te.text)
            if te.usage is not None or te.finish_reason is not None or te.server_timings is not None:
                self._on_meta(te)
            if te.done:
                done = True
                break
        if first and token_events:
            READS.firsts += 1
            if token_events > 1:
                READS.first_coalesced += 1
        if token_events > 1:
            rec.coalesced_reads += 1
            READS.coalesced += 1
        return done

    def _parse(self, parser: StreamParser, data: str, event: str | None) -> t.TokenEvent | None:
        try:
            te = parser.parse(data, event)
        except t.MalformedEvent as exc:
            raise _StreamDone(t.MALFORMED_STREAM, str(exc)) from None
        if te is not None and te.error is not None:
            raise _StreamDone(t.IN_BAND_ERROR, te.error)
        return te

    def _on_tokens(self, t_read: int, te: t.TokenEvent) -> None:
        k = te.tokens if te.tokens > 0 else 1
        self.record.event_t_ns.append(t_read)
        self.record.event_tokens.append(k)
        self.tokens_from_events += k
        if te.text:
            self.text_parts.append(te.text)

    def _on_meta(self, te: t.TokenEvent) -> None:
        rec = self.record
        if te.usage is not None:
            u = te.usage
            if u.completion_tokens is not None:
                rec.n_out, rec.n_out_source = u.completion_tokens, "usage"
            if u.prompt_tokens is not None:
                rec.n_in = u.prompt_tokens
            if u.cached_tokens is not None:
                rec.cached_tokens = u.cached_tokens
            if u.reasoning_tokens is not None:
                rec.reasoning_tokens = u.reasoning_tokens
        if te.finish_reason is not None:
            rec.finish_reason = te.finish_reason
        if te.server_timings is not None:
            rec.server_timings = te.server_timings

    def _on_close(self, decoder: FastSSEDecoder | NDJSONDecoder, parser: StreamParser, clean: bool,
                  t_read: int) -> None:  # fmt: skip
        """The body ended (cleanly or not) without the engine's normal end marker; ``t_read`` is
        the arrival of the read that ended it (t_end, as the marker's read is for a marker end)."""
        rec = self.record
        rec.t_end_ns = t_read
        try:
            tail = decoder.close()
        except UnicodeDecodeError as exc:
            raise _StreamDone(t.MALFORMED_STREAM, f"stream ends inside a UTF-8 character: {exc}") from None
        for ev in tail:
            te = self._parse(parser, ev.data, ev.event)
            if te is not None:
                if te.tokens > 0 or te.text or te.reasoning_text:
                    self._on_tokens(rec.t_end_ns, te)
                self._on_meta(te)
                if te.done:
                    rec.end = END_MARKER
                    return
        if not clean:
            raise _StreamDone(t.DISCONNECTED, "connection closed mid-stream")
        if close_is_normal_end(self.adapter, parser, rec):
            rec.end = END_CLOSE
            return
        raise _StreamDone(t.INCOMPLETE, "stream closed without the engine's normal end (no end marker, "
                                        "no finish_reason)")  # fmt: skip

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
