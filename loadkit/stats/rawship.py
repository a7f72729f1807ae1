"""Workers' raw logs shipped to the master, and the worker↔master clock offset (no Locust).

A worker on another host writes ``requests.worker<N>.jsonl`` on its own filesystem; the master's
report directory needs it (report.html's tables, ``loadkit verify``, compare, capacity). The
worker sends its log's bytes in chunks of whole lines (``ShipReader``), each tagged with its
byte offset; the master appends them to its own copy (``ShippedLog``) only where they continue
what it holds, so a resent chunk costs nothing and a worker that dies leaves a consistent prefix.

Memory: a worker holds one chunk (``CHUNK_BYTES``, or one line if a line is longer) and sends no
further than ``WINDOW_BYTES`` past what the master acknowledged, so at most that much waits in
the link's queues, during the run and at its end alike (the end waits for acknowledgements).
When nothing is acknowledged for a while (every chunk in the window lost), the worker sends
again from what the master last acknowledged (``ShipReader.resend_due``).

Resuming: the master keeps a running SHA-256 of the bytes it holds of each log; a process that
finds that log on its disk again asks for it (``held``, ``digest``), checks its file begins with
exactly those bytes (``prefix_matches``) and ships from there (``ShipReader(path, start)``).

Shared directory (the worker on the master's host and path): the worker leaves a token file in
its directory; the master finds it in its own, and the worker ships nothing (``token_name``).

Clock offset: ``ClockEstimate`` takes NTP's four timestamps of a request/reply pair (worker
sends at t1, master receives at t2 and replies at t3, worker receives at t4, wall clocks in ns)
and keeps the sample of least round trip: offset = ((t2 - t1) + (t3 - t4)) / 2 is the master's
clock minus the worker's, within half that round trip.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

CHUNK_BYTES = 256 * 1024
WINDOW_BYTES = 1024 * 1024
# Nothing acknowledged for this long with bytes in flight: send again from the acknowledged offset.
RESEND_AFTER_S = 5.0


def token_name(worker_index: int) -> str:
    """The worker's token file in its report directory (not a raw log: RAW_LOG_GLOB skips it)."""
    return f".loadkit-share-worker{worker_index}"


class ShipReader:
    """The worker's side: the next chunk of whole lines of its raw log after ``sent``."""

    def __init__(self, path: str | Path, start: int = 0) -> None:
        self.path = str(path)
        self.sent = start  # bytes handed to the link (offset of the next chunk)
        self.acked = start  # bytes the master said it holds
        self.resends = 0
        self.waiting_since = time.monotonic()  # the last acknowledgement, or the first send after one

    def next_chunk(self, limit: int = CHUNK_BYTES) -> tuple[int, bytes] | None:
        """(offset, bytes) of whole lines from ``sent``; None when no whole line is there yet."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return None
        with f:
            f.seek(self.sent)
            data = f.read(limit)
            end = data.rfind(b"\n")
            while end < 0 and len(data) >= limit:  # one line longer than a chunk: that line whole
                more = f.read(limit)
                if not more:
                    break
                data += more
                end = data.rfind(b"\n")
        if end < 0:
            return None
        offset = self.sent
        if offset == self.acked:  # nothing was in flight: the wait for an answer starts now
            self.waiting_since = time.monotonic()
        self.sent += end + 1
        return offset, data[: end + 1]

    def window_full(self) -> bool:
        return self.sent - self.acked >= WINDOW_BYTES

    def all_acked(self) -> bool:
        return self.acked >= self.sent

    def ack(self, held: int, gap: bool) -> None:
        """The master holds ``held`` bytes; ``gap``: it refused a chunk that did not continue
        them (one was lost on the way), so send again from there."""
        if held > self.acked:
            self.acked = held
            self.waiting_since = time.monotonic()
        self.sent = max(self.sent, self.acked)  # a late answer to a chunk sent before a resend
        if gap and held < self.sent:
            self.sent = held
            self.resends += 1

    def resend_due(self, after: float = RESEND_AFTER_S, now: float | None = None) -> bool:
        """Bytes in flight and no acknowledgement for ``after`` seconds (the chunks or their
        answers were lost): send again from what the master acknowledged. True when it does."""
        now = time.monotonic() if now is None else now
        if self.sent <= self.acked or now - self.waiting_since < after:
            return False
        self.sent, self.waiting_since = self.acked, now
        self.resends += 1
        return True


def prefix_matches(path: str | Path, size: int, digest: str) -> bool:
    """The file at ``path`` begins with ``size`` bytes whose SHA-256 is ``digest`` (read in
    chunks: memory stays at one chunk)."""
    h = hashlib.sha256()
    left = size
    try:
        with open(path, "rb") as f:
            while left > 0:
                data = f.read(min(left, CHUNK_BYTES))
                if not data:
                    return False
                h.update(data)
                left -= len(data)
    except OSError:
        return False
    return h.hexdigest() == digest


@dataclass
class ShippedLog:
    """The master's copy of one worker's raw log, appended only where it continues."""

    path: str
    held_bytes: int = 0
    held_lines: int = 0
    chunks: int = 0
    duplicates: int = 0  # chunks (or their parts) already held: skipped
    gaps: int = 0  # chunks that started past what is held: refused, asked again
    worker_bytes: int | None = None  # the worker's own count, from its newest snapshot
    worker_lines: int | None = None
    worker_lost: bool = False  # the master lost the worker: the copy is the prefix that arrived
    node: str | None = None  # the host name the worker said hello from
    resumed_at: int | None = None  # a restarted process resumed shipping at this offset
    resumed_bytes: int | None = None  # ... and found the log this long on its disk
    _file: IO[bytes] | None = field(default=None, repr=False)
    _sha: Any = field(default_factory=hashlib.sha256, repr=False)

    def open(self) -> None:
        """The copy's file, created empty at the worker's hello (a worker that sends no request
        has an empty log on the master too, as on one host)."""
        if self._file is None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._file = open(self.path, "wb" if self.held_bytes == 0 else "ab")  # noqa: SIM115

    def receive(self, offset: int, data: bytes) -> str:
        """Append what continues the held bytes: "appended", "duplicate" or "gap"."""
        if offset > self.held_bytes:
            self.gaps += 1
            return "gap"
        tail = data[self.held_bytes - offset :]
        if not tail:
            self.duplicates += 1
            return "duplicate"
        self.open()
        assert self._file is not None
        self._file.write(tail)
        self._file.flush()  # what arrived is on the master's disk, whatever happens next
        self._sha.update(tail)
        self.held_bytes += len(tail)
        self.held_lines += tail.count(b"\n")
        self.chunks += 1
        if len(tail) < len(data):
            self.duplicates += 1
        return "appended"

    def digest(self) -> str:
        """SHA-256 of the bytes held (what a resuming process checks its file against)."""
        return self._sha.copy().hexdigest()

    def resume(self, node: str | None, log_bytes: int) -> tuple[int, str] | None:
        """A process on ``node`` found this log ``log_bytes`` long on its disk and asks what is
        held: (offset, digest) to continue from, or None when it is not the worker's host (or
        its log is shorter than what is held: not the same log)."""
        if self.node is not None and node != self.node:
            return None
        if log_bytes < self.held_bytes:
            return None
        self.resumed_at, self.resumed_bytes = self.held_bytes, log_bytes
        return self.held_bytes, self.digest()

    def complete(self) -> bool:
        """The copy holds exactly what the worker's newest snapshot counted (a lost worker's
        copy may hold more: lines it shipped after its last snapshot), or, resumed, the whole
        log the resuming process found."""
        if self.resumed_bytes is not None:
            return self.held_bytes == self.resumed_bytes
        return self.worker_bytes is not None and self.held_bytes == self.worker_bytes

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def describe(self) -> dict[str, Any]:
        return {"mode": "shipped", "bytes_received": self.held_bytes, "lines_received": self.held_lines,
                "worker_bytes": self.worker_bytes, "worker_lines": self.worker_lines,
                "complete": self.complete(), "worker_lost": self.worker_lost, "chunks": self.chunks, "duplicates_skipped": self.duplicates,
                "gaps_asked_again": self.gaps, "path": os.path.basename(self.path), "node": self.node,
                "resumed_at": self.resumed_at, "resumed_bytes": self.resumed_bytes}  # fmt: skip


@dataclass
class ClockEstimate:
    """The worker's clock against the master's, from the request/reply sample of least round trip."""

    samples: int = 0
    offset_ns: int | None = None  # master's wall clock minus the worker's
    rtt_ns: int | None = None

    def add(self, t1: int, t2: int, t3: int, t4: int) -> None:
        rtt = (t4 - t1) - (t3 - t2)
        if rtt < 0:
            return  # a clock stepped between t1 and t4: no sample
        self.samples += 1
        if self.rtt_ns is None or rtt < self.rtt_ns:
            self.rtt_ns, self.offset_ns = rtt, ((t2 - t1) + (t3 - t4)) // 2

    def describe(self) -> dict[str, Any]:
        return {"offset_ms": None if self.offset_ns is None else self.offset_ns / 1e6,
                "rtt_ms": None if self.rtt_ns is None else self.rtt_ns / 1e6,
                "uncertainty_ms": None if self.rtt_ns is None else self.rtt_ns / 2e6,
                "samples": self.samples}  # fmt: skip


# A worker's wall-clock times are corrected by its offset when that exceeds its uncertainty by
# this (locust/rawshipping.py); an offset left beyond CLOCK_WARN_MS after that is warned of.
CLOCK_APPLY_MS = 1.0
CLOCK_WARN_MS = 2.0
# The figures that put several nodes' wall-clock times on one timeline (docs/distributed.md).
WALL_CLOCK_FIGURES = (
    "the run's and each class's window and the rates over it (requests_per_s, throughput), "
    "the tenants' spans, the delivered section's realised rate, CV, fit and concurrency, "
    "and the time series' seconds"
)


def clock_warnings(clocks: dict[str, dict[str, Any]], limit_ms: float = CLOCK_WARN_MS) -> list[str]:
    """A warning per worker whose measured offset from the master, less the correction its
    figures carry (``applied_ms``), exceeds ``limit_ms`` beyond its uncertainty: the figures
    that merge nodes' wall-clock times are off by about that much."""
    out = []
    for name, clock in sorted(clocks.items()):
        measured, uncertainty = clock.get("offset_ms"), clock.get("uncertainty_ms") or 0.0
        if measured is None:
            continue
        offset = measured - (clock.get("applied_ms") or 0.0)
        if abs(offset) - uncertainty <= limit_ms:
            continue
        out.append(f"{name}'s wall clock is {offset:+.1f} ms off the master's (± {uncertainty:.1f} ms) "
                   "after the correction applied at its start: "
                   f"{WALL_CLOCK_FIGURES} merge the nodes' wall clocks and are off by up to that much; "
                   "synchronise the hosts' clocks (NTP)")  # fmt: skip
    return out
