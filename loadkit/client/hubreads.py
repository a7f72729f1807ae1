"""Reading streams in the gevent hub: stamp at arrival, decode later, and never let a burst
of greenlet work leave a socket unread for a whole inter-token interval.

Two readers share one callback per socket (``ArrivalQueue._on_readable``: read, stamp, queue):

- a persistent libev read watcher, run by the hub when it polls;
- the hub's ``ArrivalPoller``: an epoll set of the same sockets that any greenlet drains when
  it has run ``POLL_EVERY_NS`` since the last drain (``maybe_poll()``, called from the request
  path). gevent polls sockets only between batches of 50 woken greenlets (and a switch
  interval); when hundreds of streams end and restart in one pass those batches took over
  10 ms, and a read holding two events knows only the newer one's arrival. Draining from
  inside the greenlets bounds that gap by the poll period plus one stretch of work between
  two ``maybe_poll()`` calls.

Both are used from the hub's thread only (one OS thread per gevent hub), so they share one
receive buffer per hub.

The one module outside ``loadkit.locust`` and the web UI that imports gevent (an ignore,
with its reason, in pyproject.toml's import contracts): the client picks this reader itself
whenever it is handed a gevent socket, under Locust or not, and importing gevent patches
nothing.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from loadkit.client.stamps import READS, RECV_SIZE, recv_stamped

POLL_EVERY_NS = 1_000_000
_perf_ns = time.perf_counter_ns
_TERMINATOR = b"\r\n0\r\n\r\n"  # the last chunk of a chunked body

try:  # importing gevent does not patch anything; only Locust's monkey.patch_all does
    from gevent import getcurrent as _getcurrent
except ImportError:  # pragma: no cover - gevent comes with Locust
    _getcurrent = None


def is_gevent_socket(sock: socket.socket) -> bool:
    """True for gevent's cooperative sockets (Locust monkey-patches `socket`)."""
    return type(sock).__module__.startswith("gevent")


class GeventDeadline:
    """Under gevent, one timer per deadline rather than one per read: a socket timeout makes
    gevent arm and cancel a fresh Timeout around every wait (~5 µs of ~25 per read, profiled).
    The deadline only changes once, when the first token ends the first-token limit."""

    __slots__ = ("_timeout", "_deadline_ns")

    def __init__(self) -> None:
        self._timeout: Any = None
        self._deadline_ns: int | None = None

    def arm(self, deadline_ns: int) -> None:
        if deadline_ns == self._deadline_ns:
            return
        import gevent

        self.cancel()
        seconds = max(1e-3, (deadline_ns - time.perf_counter_ns()) / 1e9)
        self._timeout = gevent.Timeout(seconds, TimeoutError)
        self._timeout.start()
        self._deadline_ns = deadline_ns

    def cancel(self) -> None:
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout, self._deadline_ns = None, None


class ArrivalPoller:
    """An epoll set of every open ArrivalQueue's socket; drained by whoever runs."""

    __slots__ = ("_epoll", "_queues", "_last", "_in", "polls", "buf")

    def __init__(self) -> None:
        import select

        try:
            from gevent.monkey import get_original

            epoll = get_original("select", "epoll")  # gevent's monkey patching removes it
        except (ImportError, AttributeError):
            epoll = select.epoll
        self._epoll = epoll()
        self._queues: dict[int, ArrivalQueue] = {}
        self._last = time.perf_counter_ns()
        self._in = select.EPOLLIN
        self.polls = 0
        # The one receive buffer of this hub's reads (they never overlap: one OS thread).
        self.buf = memoryview(bytearray(RECV_SIZE))

    def register(self, fd: int, queue: ArrivalQueue) -> None:
        self._queues[fd] = queue
        try:
            self._epoll.register(fd, self._in)
        except FileExistsError:  # a closed socket's number reused before we heard of it
            self._epoll.modify(fd, self._in)

    def unregister(self, fd: int, queue: ArrivalQueue) -> None:
        if self._queues.get(fd) is queue:
            del self._queues[fd]
            try:
                self._epoll.unregister(fd)
            except (OSError, ValueError):
                pass

    def maybe_poll(self) -> None:
        """``poll()`` if the last is POLL_EVERY_NS old: called between every two reads a
        greenlet decodes, so it is one clock read and a comparison when not due."""
        if _perf_ns() - self._last >= POLL_EVERY_NS:
            self.poll()

    def poll(self) -> None:
        self._last = _perf_ns()
        self.polls += 1
        get = self._queues.get
        for fd, _events in self._epoll.poll(0):
            queue = get(fd)
            if queue is not None:
                queue._on_readable()


def hub_poller(hub: Any) -> ArrivalPoller:
    """The hub's poller (created with its first stream)."""
    poller = getattr(hub, "_loadkit_poller", None)
    if poller is None:
        poller = hub._loadkit_poller = ArrivalPoller()
    return poller


def maybe_poll() -> None:
    """Drain every stream socket of this hub if the last drain is over POLL_EVERY_NS old.
    Cheap when not due (attribute lookups and one clock read); call it between stretches of
    greenlet work. A request greenlet's parent is its hub; the hub's (and a thread's main
    greenlet's) parent has no poller, so in the hub, or without gevent, this does nothing."""
    if _getcurrent is None:
        return
    poller = getattr(getattr(_getcurrent(), "parent", None), "_loadkit_poller", None)
    if poller is not None:
        poller.maybe_poll()


class ArrivalQueue:
    """Under gevent: the arrival path in the hub, everything else in the request's greenlet.

    A persistent read watcher's callback only reads, stamps and queues; decoding waits. The
    greenlet is woken through the loop's callback queue after every read while ``batch`` is
    1 (before the first token, so the first-token limit is watched), then once ``batch``
    reads are queued, at the chunked terminator, at end of stream or error, and at the
    first read that comes ``flush_s`` or more after the oldest queued one. A stream that
    stops sending is decoded when its deadline fires (the caller takes what is queued then).
    In a burst every readable socket is thus
    read and stamped before any greenlet decodes, and a greenlet switch is paid per batch,
    not per read (a blocking read per greenlet cost ~11 µs against ~3 µs for this callback,
    measured). Deadlines stay with the caller (a gevent Timeout around ``take``); ``close``
    must be called on every exit.
    """

    __slots__ = ("_raw", "_kernel", "_watcher", "_hub", "_reads", "_waiter", "_wake_pending", "_error",
                 "_tail", "_flush_ns", "batch", "_buf", "_fd", "_poller", "poller")  # fmt: skip

    def __init__(self, sock: socket.socket, kernel: bool, flush_s: float = 1.0) -> None:
        from gevent import get_hub

        self._raw: socket.socket = sock._sock  # type: ignore[attr-defined]  # gevent's non-blocking socket
        self._kernel = kernel
        self._hub = get_hub()
        self._reads: list[tuple[int, bytes, bool]] = []
        self._waiter: Any = None
        self._wake_pending = False
        self._error: OSError | None = None
        self._tail = b""
        self.batch = 1
        self._flush_ns = int(flush_s * 1e9)
        self._fd = sock.fileno()
        self._watcher: Any = self._hub.loop.io(self._fd, 1)
        self._watcher.start(self._on_readable)
        self.poller = hub_poller(self._hub)  # kept after close (a reader's poll is bound to it)
        self._poller: ArrivalPoller | None = self.poller  # None once unregistered
        self.poller.register(self._fd, self)
        self._buf = self.poller.buf

    @staticmethod
    def usable(sock: socket.socket) -> bool:
        """gevent's socket wraps a real non-blocking one; anything else reads the plain way."""
        raw = getattr(sock, "_sock", None)
        return raw is not None and type(sock).__module__.startswith("gevent")

    def _on_readable(self) -> None:
        try:
            data, t_read = recv_stamped(self._raw, self._kernel, self._buf)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(exc)
            return
        self._queue(t_read, data, READS.last_late)

    def _queue(self, t_read: int, data: bytes, late: bool = False) -> None:
        """Queue one stamped read (b"": the end) and wake the greenlet when a batch is due.
        Shared by the plain and TLS callbacks: one call per read, no per-read branch on TLS."""
        reads = self._reads
        reads.append((t_read, data, late))
        if not data:
            self._stop_reading()  # end of stream: the watcher would fire forever
            self._wake()
            return
        # The chunked terminator, even split across reads: a read of 7 bytes or more holds
        # it whole or not at all (kept by reference, no copy); a shorter one joins the last.
        if len(data) >= 7:
            self._tail = data
            end = data.endswith(_TERMINATOR)
        else:
            self._tail = (self._tail[-7:] + data)[-7:]
            end = self._tail == _TERMINATOR
        if end or len(reads) >= self.batch or t_read - reads[0][0] >= self._flush_ns:
            self._wake()

    def _fail(self, exc: OSError) -> None:
        self._error = exc
        self._stop_reading()
        self._wake()

    def _stop_reading(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._poller is not None:
            self._poller.unregister(self._fd, self)
            self._poller = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._wake_pending:
            self._wake_pending = True
            self._hub.loop.run_callback(self._switch)

    def _switch(self) -> None:
        self._wake_pending = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.switch(None)

    def take(self) -> list[tuple[int, bytes, bool]]:
        """Every (arrival ns, bytes) read so far, waiting for a wake-up if there is none;
        b"" is the end of the stream. Raises the read's OSError (connection reset ...)."""
        if not self._reads and self._error is None:
            from gevent.hub import Waiter

            self._waiter = Waiter()
            try:
                self._waiter.get()
            finally:
                self._waiter = None
        return self.take_nowait()

    def take_nowait(self) -> list[tuple[int, bytes, bool]]:
        """What is queued now, without waiting (also to keep reads a timeout interrupted)."""
        if self._reads or self._error is None:
            reads, self._reads = self._reads, []
            return reads
        raise self._error

    def close(self) -> None:
        """Stop watching; safe to call more than once."""
        if self._poller is not None:
            self._poller.unregister(self._fd, self)
            self._poller = None
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher.close()
            self._watcher = None
