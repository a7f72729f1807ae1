"""Drives a Scheduler in real time on the event loop, and keeps the truth log.

Steps run back to back like GPU kernels: step k ends at ``end(k-1) + duration(k)``, computed
from the *scheduled* end of the previous step, so a late wake-up does not shift later steps
(lateness is measured, not absorbed). Only when the loop falls more than ``resync_ms`` behind
does it restart the timeline from now (counted in ``resyncs``).

Timer precision: epoll and libuv wake up with millisecond granularity, so the runner sleeps
until ``spin_us`` before the step end and busy-waits the rest. The spin is the price of
sub-millisecond event timing; ``--spin-us 0`` turns it off.
"""

from __future__ import annotations

import asyncio
import time
from typing import IO, Any

import orjson

from loadkit.sim.engine import Scheduler

_BUCKET_NS = 10_000  # lateness histogram: 10 us buckets up to 1 s
_N_BUCKETS = 100_000


class LatenessStats:
    """Histogram of (event write time - scheduled step end)."""

    __slots__ = ("buckets", "count", "max_ns")

    def __init__(self) -> None:
        self.buckets = [0] * _N_BUCKETS
        self.count = 0
        self.max_ns = 0

    def add(self, late_ns: int) -> None:
        i = late_ns // _BUCKET_NS
        self.buckets[i if i < _N_BUCKETS else _N_BUCKETS - 1] += 1
        self.count += 1
        if late_ns > self.max_ns:
            self.max_ns = late_ns

    def quantile_ms(self, q: float) -> float | None:
        """Upper edge of the bucket holding quantile q, in ms; None with no events."""
        if not self.count:
            return None
        target, seen = q * self.count, 0
        for i, c in enumerate(self.buckets):
            seen += c
            if c and seen >= target:
                return (i + 1) * _BUCKET_NS / 1e6
        return self.max_ns / 1e6

    def summary(self) -> dict[str, Any]:
        return {
            "events": self.count,
            "p50_ms": self.quantile_ms(0.5),
            "p99_ms": self.quantile_ms(0.99),
            "p999_ms": self.quantile_ms(0.999),
            "max_ms": self.max_ns / 1e6 if self.count else None,
            "within_1ms": sum(self.buckets[: 1_000_000 // _BUCKET_NS]) / self.count if self.count else None,
        }


class EngineRunner:
    """The step loop of one simulated engine."""

    def __init__(self, scheduler: Scheduler, spin_us: float = 1200.0, resync_ms: float = 50.0) -> None:
        self.scheduler = scheduler
        self.spin_ns = int(spin_us * 1000)
        self.resync_ns = int(resync_ms * 1_000_000)
        self.lateness = LatenessStats()
        self.step_lateness = LatenessStats()  # first write of each step
        self.resyncs = 0
        self.tokens_written = 0
        self._wake = asyncio.Event()
        self.step_end_ns = 0  # scheduled end of the step being delivered

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        sched = self.scheduler
        t_end = time.monotonic_ns()
        while True:
            if sched.idle():
                self._wake.clear()
                await self._wake.wait()
                t_end = time.monotonic_ns()
            plan = sched.step()
            if plan.duration_ns == 0:
                await asyncio.sleep(0)
                continue
            due = t_end + plan.duration_ns
            await self._sleep_until(due)
            self.step_end_ns = due
            self._deliver(plan.emissions, due)
            t_end = self._next_start(due)

    async def _sleep_until(self, due: int) -> None:
        delay = due - time.monotonic_ns() - self.spin_ns
        await asyncio.sleep(delay / 1e9 if delay > 0 else 0)
        while time.monotonic_ns() < due:
            pass

    def _deliver(self, emissions: list[tuple[Any, int]], due: int) -> None:
        """Hand each emission to its sink; histogram inlined (this loop runs per token)."""
        hist = self.lateness
        buckets, top = hist.buckets, _N_BUCKETS - 1
        first_t = count = tokens = 0
        t = 0
        for seq, n in emissions:
            sink = seq.sink
            if sink is None or seq.aborted:
                continue
            t = sink.on_tokens(n)
            if t:
                i = (t - due) // _BUCKET_NS
                buckets[i if i < top else top] += 1
                count += 1
                tokens += n
                if not first_t:
                    first_t = t
        if count:
            hist.count += count
            hist.max_ns = max(hist.max_ns, t - due)
            self.step_lateness.add(first_t - due)
            self.tokens_written += tokens

    def _next_start(self, due: int) -> int:
        now = time.monotonic_ns()
        if now - due > self.resync_ns:
            self.resyncs += 1
            return now
        return due


class TruthLog:
    """One JSON line per finished request; buffered, flushed by a timer and at shutdown."""

    def __init__(self, path: str) -> None:
        self._fh: IO[bytes] = open(path, "ab")  # noqa: SIM115 - lives as long as the server
        self.lines = 0

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(orjson.dumps(record) + b"\n")
        self.lines += 1

    def flush(self) -> None:
        if not self._fh.closed:
            self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()
