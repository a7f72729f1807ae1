"""One stamped-read interface behind both read paths.

A timed stream reads its connection through a :class:`StampedReader`: ``take()`` returns the
next reads as ``(arrival ns, bytes)`` pairs (b"" is the end of the stream), each stamped when
its bytes arrived, not when the request's code got round to them. Two readers:

- :class:`QueuedReader`, under gevent (Locust): the hub reads and stamps every readable socket
  (``hubreads.ArrivalQueue``) and hands the greenlet a batch at a time; one gevent timer per
  deadline bounds the wait.
- :class:`DirectReader`, anywhere else: one blocking stamped read per ``take()``, bounded by
  the socket timeout.

The request logic (head, HTTP framing, SSE, adapter, record) is written once over this
interface (``read_head`` here, the body loop in ``timer.StreamRun``). ``take`` is called per
batch, not per event: the per-event work stays in ``events.EventDecoder``.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
from typing import Protocol

from loadkit.client.httpstream import MAX_HEADER_BYTES, ProtocolError, ResponseHead, parse_head
from loadkit.client.hubreads import ArrivalQueue, GeventDeadline, is_gevent_socket
from loadkit.client.stamps import READS, recv_stamped
from loadkit.client.tlsstream import TlsConn, arrival_queue

# Reads an ArrivalQueue may hold before the greenlet decodes them (after the first token),
# drawn per batch from this range.
QUEUE_BATCH = (8, 40)

# (arrival ns, bytes, waited): ``waited`` is whether that read's data sat over the late mark in
# its socket (``stamps.READS.last_late`` right after the read). It travels with the read because
# reads are stamped in hub callbacks and decoded later in the stream's greenlet, after other
# sockets' reads: the process-wide flag would by then be another read's.
Reads = list[tuple[int, bytes, bool]]


class StampedReader(Protocol):
    """The reads of one connection, each with the arrival time of its newest byte."""

    # Called between reads of a batch: lets the hub's other sockets be read (a no-op off gevent).
    poll: Callable[[], None]

    def arm(self, deadline_ns: int) -> None:
        """Bound the following ``take`` calls by ``deadline_ns`` (perf_counter ns)."""

    def take(self) -> Reads:
        """The next reads (at least one), waiting if there is none; TimeoutError at the deadline."""

    def take_nowait(self) -> Reads:
        """The reads already made, without waiting (after a deadline interrupted ``take``)."""

    def streaming(self) -> None:
        """The first token came on a chunked body: later reads may be taken in batches."""

    def close(self) -> None:
        """Stop reading; safe to call more than once."""


def _nothing() -> None:
    return None


class DirectReader:
    """Blocking reads on the socket itself: one stamped read per ``take``, bounded by the
    socket timeout. Under gevent every stream socket is queued (``ArrivalQueue.usable``); one
    that is not would read here, correctly but with gevent's Timeout armed per wait."""

    __slots__ = ("_sock", "_kernel", "_recv", "_deadline_ns")
    poll = staticmethod(_nothing)

    def __init__(self, sock: socket.socket, kernel: bool, tls: TlsConn | None) -> None:
        self._sock, self._kernel = sock, kernel
        self._recv = recv_stamped if tls is None else tls.recv_stamped  # per connection, not per read
        self._deadline_ns = 0

    def arm(self, deadline_ns: int) -> None:
        self._deadline_ns = deadline_ns

    def take(self) -> Reads:
        remaining = (self._deadline_ns - time.perf_counter_ns()) / 1e9
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self._sock.settimeout(remaining)
        data, t_read = self._recv(self._sock, self._kernel)
        return [(t_read, data, READS.last_late)]

    def take_nowait(self) -> Reads:
        return []  # nothing is read ahead

    def streaming(self) -> None:
        return None

    def close(self) -> None:
        return None


class QueuedReader:
    """Under gevent: reads stamped in the hub by an ArrivalQueue, taken in batches."""

    __slots__ = ("_queue", "_guard", "poll")

    def __init__(self, sock: socket.socket, kernel: bool, tls: TlsConn | None) -> None:
        self._queue = arrival_queue(sock, kernel, tls)
        # The hub's poller, bound once: ``hubreads.maybe_poll`` finds it through the current
        # greenlet on every call, and this runs between every two reads decoded.
        self.poll: Callable[[], None] = self._queue.poller.maybe_poll
        # One timer per deadline, not one per read (see GeventDeadline).
        self._guard = GeventDeadline()

    def arm(self, deadline_ns: int) -> None:
        self._guard.arm(deadline_ns)

    def take(self) -> Reads:
        return self._queue.take()

    def take_nowait(self) -> Reads:
        return self._queue.take_nowait()

    def streaming(self) -> None:
        # Sizes vary so streams started together do not all decode in the same loop pass,
        # which would leave every socket unread for that long.
        self._queue.batch = random.randint(*QUEUE_BATCH)

    def close(self) -> None:
        self._queue.close()
        self._guard.cancel()


def open_reader(sock: socket.socket, kernel: bool, tls: TlsConn | None) -> StampedReader:
    """The connection's reader, chosen once; set up before the request is written, so the
    head and the first token are stamped as they arrive whatever the greenlet is doing."""
    if is_gevent_socket(sock) and ArrivalQueue.usable(sock):
        return QueuedReader(sock, kernel, tls)
    return DirectReader(sock, kernel, tls)


def read_head(reader: StampedReader, deadline_ns: int) -> tuple[ResponseHead, Reads]:
    """The response head, and the reads already taken after the one that ended it. The head's
    ``leftover`` is the body bytes of that read, ``t_arrival_ns`` its arrival."""
    buf = b""
    reader.arm(deadline_ns)
    while True:
        reads = reader.take()
        for i, (t_read, data, late) in enumerate(reads):
            if not data:
                raise ConnectionResetError("connection closed before the response head was complete")
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                head = parse_head(buf[:end], buf[end + 4 :])
                head.t_arrival_ns, head.arrival_late = t_read, late
                return head, reads[i + 1 :]
            if len(buf) > MAX_HEADER_BYTES:
                raise ProtocolError(f"response head longer than {MAX_HEADER_BYTES} bytes")
