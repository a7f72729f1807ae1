"""Kernel receive stamps and the read path's self-check counters.

Every read of a timed stream goes through :func:`recv_stamped`: one ``recvmsg`` with
SO_TIMESTAMPNS, the kernel's stamp mapped onto ``time.perf_counter_ns()`` by
:class:`ArrivalClock`, and the process-wide :data:`READS` counters bumped (the self-check
reads them). This is the most benchmarked code in loadkit: keep it O(1) per read.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

RECV_SIZE = 65536

# Linux values; Python's socket module does not export them. SCM_TIMESTAMPNS == SO_TIMESTAMPNS.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: tv_sec, tv_nsec
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)
_unpack_timespec = _TIMESPEC.unpack_from  # bound once: recv_stamped runs for every read
_SOL_SOCKET = socket.SOL_SOCKET
_perf_ns = time.perf_counter_ns
# Re-sample the wall/monotonic offset this often: NTP slews the wall clock slowly, so a
# second-old offset is off by well under a microsecond.
OFFSET_REFRESH_NS = 1_000_000_000


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

    def __init__(
        self, mono: Callable[[], int] = time.perf_counter_ns, wall: Callable[[], int] = time.time_ns
    ) -> None:
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
            self.refresh(now_mono)
        return wall_ns - self._offset

    def refresh(self, now_mono: int) -> None:
        """A new offset, valid until OFFSET_REFRESH_NS after ``now_mono`` (recv_stamped inlines
        ``to_mono`` and calls this when due)."""
        self._offset = self.sample_offset()
        self._next_refresh = now_mono + OFFSET_REFRESH_NS


ARRIVAL_CLOCK = ArrivalClock()


class ReadCounts(NamedTuple):
    """A snapshot of the cumulative read counters (``ReadCounters.counts()``), what the
    self-check samples (``selfcheck.window.Sample``):
    reads, kernel-stamped ones, late ones (waited over ``late_ms``), reads holding several
    token events, first tokens and those in such reads; token events, those in coalesced
    reads, and coalesced reads that were also late (reads, events, first tokens)."""

    reads: int = 0
    kernel_stamped: int = 0
    late: int = 0
    coalesced: int = 0
    firsts: int = 0
    first_coalesced: int = 0
    events: int = 0
    coalesced_events: int = 0
    late_coalesced: int = 0
    late_coalesced_events: int = 0
    first_late_coalesced: int = 0


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
    # Token events, and those in reads holding several: every one of those is an ITL sample
    # that may be off (the gap into the read's first event is too long, the gaps inside it 0).
    events: int = 0
    coalesced_events: int = 0
    # The same for reads that also waited over ``late_ns``: a read the client left waiting is
    # what turns a burst into coalescing of the client's making. A server's back-to-back
    # writes read on time wait ~0 (their timestamps are right: the events arrived together).
    late_coalesced: int = 0
    late_coalesced_events: int = 0
    first_late_coalesced: int = 0
    # Whether the newest read waited over ``late_ns``: set by every read, taken by its caller
    # right after it, and carried with the read's bytes to the decoder (``client.reads.Reads``).
    last_late: bool = False

    def counts(self) -> ReadCounts:
        """A snapshot for the self-check (once per evaluation step, not per read)."""
        return ReadCounts(*(getattr(self, name) for name in ReadCounts._fields))


READS = ReadCounters()


def recv_stamped(sock: socket.socket, kernel: bool, buf: memoryview | None = None) -> tuple[bytes, int]:
    """One read and the arrival time of its newest byte (perf_counter ns).

    With kernel stamps the time is the kernel's, mapped to the monotonic clock and capped at
    the user-space read time; otherwise (or when no stamp came back) the time the read returned.

    ``buf``: a reusable receive buffer, for callers that can never run two reads at once (the
    gevent hub's read callbacks). Reading into it and copying out the few hundred bytes that
    came avoids a 64 KiB allocation shrunk to size per read, which fragmented glibc's heap
    enough to grow a long run's RSS (docs/performance.md, Soak).

    Written flat (the clock mapping inlined, module names bound as defaults): this runs once
    per token event of every stream, and each call or global lookup saved is measurable
    (~1.7 µs over the bare ``recvmsg_into`` before, profiled at 500 streams).
    """
    reads = READS
    reads.reads += 1
    if buf is not None:
        if not kernel:
            n = sock.recv_into(buf)
            return buf[:n].tobytes(), _perf_ns()
        n, anc, _flags, _addr = sock.recvmsg_into((buf,), _ANC_SIZE)
        data = buf[:n].tobytes()
    elif not kernel:
        data = sock.recv(RECV_SIZE)
        return data, _perf_ns()
    else:
        data, anc, _flags, _addr = sock.recvmsg(RECV_SIZE, _ANC_SIZE)
    t_user = _perf_ns()
    for level, kind, raw in anc:
        if kind == SCM_TIMESTAMPNS and level == _SOL_SOCKET and len(raw) >= 16:
            sec, nsec = _unpack_timespec(raw)
            reads.kernel_stamped += 1
            clock = ARRIVAL_CLOCK
            if t_user >= clock._next_refresh:
                clock.refresh(t_user)
            t_kernel = sec * 1_000_000_000 + nsec - clock._offset
            if t_kernel >= t_user:
                reads.last_late = False
                return data, t_user
            if t_user - t_kernel > reads.late_ns:
                reads.late += 1
                reads.last_late = True
            else:
                reads.last_late = False
            return data, t_kernel
    reads.last_late = False
    return data, t_user
