"""Drives a Scheduler in real time on the event loop, and keeps the truth log.

Steps run back to back like GPU kernels: step k ends at ``end(k-1) + duration(k)``, computed
from the *scheduled* end of the previous step, so a late wake-up does not shift later steps
(lateness is measured, not absorbed).

Output stage. A real engine does not put a step's outputs on the wire at one instant: its
output path (vLLM's output processor, detokenizer and API server) handles them one after
another while the next step already runs on the GPU. Likewise here: the events of a step are
scheduled ``output_us_per_event`` apart from the step's end (event k at ``end + k × gap``) and
written by an output loop that runs *during* the next step's time, so the step clock never
waits for the socket writes. On one core the writes cannot all leave at the step end anyway
(a loopback ``send()`` alone costs ~5 µs of kernel time, 10 ms for a 2,000-sequence step);
with the gap at or above the real per-event cost, every event can leave on its schedule.
``--output-us-per-event 0`` writes a step's events back to back at its end (as fast as the
CPU allows). Lateness is measured per event against that schedule.

If the output falls more than ``resync_ms`` behind, the step clock waits for it and then
restarts its timeline from now (counted in ``resyncs``): an overloaded simulator slows down
visibly rather than queueing without bound.

Timer precision: epoll and libuv wake up with millisecond granularity, so the runner sleeps
until ``spin_us`` before a deadline and busy-waits the rest. The spin is the price of
sub-millisecond event timing; ``--spin-us 0`` turns it off.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import IO, Any

import orjson

from loadkit.sim.engine import Scheduler, StepPlan

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

    def sparse(self) -> dict[str, int]:
        """Non-empty buckets as {index: count} (JSON keys), so a reader can subtract two
        snapshots and get the lateness of a window alone (e.g. without a warm-up)."""
        return {str(i): c for i, c in enumerate(self.buckets) if c}

    @classmethod
    def from_sparse(cls, sparse: dict[str, int]) -> LatenessStats:
        stats = cls()
        for i, c in sparse.items():
            stats.buckets[int(i)] = c
            stats.count += c
            stats.max_ns = max(stats.max_ns, (int(i) + 1) * _BUCKET_NS)
        return stats

    def summary(self) -> dict[str, Any]:
        return {
            "events": self.count,
            "p50_ms": self.quantile_ms(0.5),
            "p99_ms": self.quantile_ms(0.99),
            "p999_ms": self.quantile_ms(0.999),
            "max_ms": self.max_ns / 1e6 if self.count else None,
            "within_1ms": sum(self.buckets[: 1_000_000 // _BUCKET_NS]) / self.count if self.count else None,
        }


class OutBatch:
    """The events of one step, waiting for the output loop."""

    __slots__ = ("seqs", "counts", "due", "pos", "written")

    def __init__(self, seqs: list[Any], counts: list[int], due: int) -> None:
        self.seqs, self.counts = seqs, counts
        self.due = due  # scheduled end of the step
        self.pos = 0  # next emission to look at
        self.written = 0  # events written so far (event k is scheduled at due + k * gap)


# Events scheduled within this much of now are written now rather than spun for.
_SLACK_NS = 20_000
# Least time before a step's end at which the next step is planned.
_MIN_LEAD_NS = 200_000
# Time given to queued requests when events are due (at least one request), and when idle.
_INTAKE_MIN_NS = 100_000
_INTAKE_IDLE_NS = 5_000_000
_INTAKE_AT_PLAN_NS = 1_000_000  # a burst beyond this joins later steps (admission is budgeted anyway)
# Events written between two yields to the event loop (new requests, reads, accepts).
_CHUNK = 128


class EngineRunner:
    """The step loop and the output loop of one simulated engine."""

    def __init__(self, scheduler: Scheduler, spin_us: float = 1200.0, resync_ms: float = 50.0,
                 output_us_per_event: float = 0.0) -> None:  # fmt: skip
        self.scheduler = scheduler
        self.spin_ns = int(spin_us * 1000)
        self.resync_ns = int(resync_ms * 1_000_000)
        self.gap_ns = int(output_us_per_event * 1000)
        self.lateness = LatenessStats()  # every event against its schedule
        self.step_lateness = LatenessStats()  # first write of each step against the step end
        self.resyncs = 0
        self.tokens_written = 0
        self._wake = asyncio.Event()
        self._out: deque[OutBatch] = deque()
        self._lead_ns = _MIN_LEAD_NS
        # Generation requests wait here between arrival and admission; the output loop takes
        # them in the time its writes do not need, so a burst of arrivals delays admissions
        # (server-side queueing, inside TTFT) instead of every running stream's next event.
        self.intake: deque[Any] = deque()
        self.on_request: Callable[[Any], None] | None = None
        self.step_end_ns = 0  # scheduled end of the step whose events are being written

    def wake(self) -> None:
        self._wake.set()

    def submit(self, item: Any) -> None:
        self.intake.append(item)
        self._wake.set()

    def _take_requests(self, deadline_ns: int) -> None:
        """Admit queued requests until the deadline (at least one)."""
        intake, handle = self.intake, self.on_request
        assert handle is not None
        while intake:
            handle(intake.popleft())
            if time.monotonic_ns() >= deadline_ns:
                return

    async def run(self) -> None:
        sched = self.scheduler
        while True:
            if sched.idle():
                await self._output_until(None)  # finish writing what the last steps emitted
                if sched.idle() and not self.intake:
                    self._wake.clear()
                    await self._wake.wait()
                continue
            t_end = planned = time.monotonic_ns()
            plan: StepPlan | None = sched.step()
            while plan is not None and plan.duration_ns:
                # A step planned late (the loop behind its schedule) admits no earlier than planned.
                _stamp_admitted(plan, max(t_end, planned))
                due = t_end + plan.duration_ns
                # Plan the next step a little before this one ends, so that its CPU time (~1 µs
                # per running sequence) falls in the output loop's idle time rather than at the
                # step boundary, where this step's events are due. Requests arriving in that
                # lead join one step later; the lead is a few hundred µs at small batches.
                await self._output_until(due - self._lead_ns)
                if self.intake:  # what arrived before this planning point joins the next step
                    self._take_requests(time.monotonic_ns() + _INTAKE_AT_PLAN_NS)
                t0 = planned = time.monotonic_ns()
                following = None if sched.idle() else sched.step()
                self._lead_ns = 2 * (time.monotonic_ns() - t0) + _MIN_LEAD_NS
                await self._output_until(due)
                if plan.seqs:
                    self._out.append(OutBatch(plan.seqs, plan.counts, due))
                t_end = self._next_start(due)
                plan = following
            if plan is not None:  # a step with nothing to do (e.g. the KV pool is full)
                await asyncio.sleep(0)

    # ---- output loop ---------------------------------------------------------------------

    def _next_event_ns(self) -> int:
        b = self._out[0]
        return b.due + b.written * self.gap_ns

    async def _output_until(self, until: int | None) -> None:
        """Write events as they fall due until `until` (None: until none is left)."""
        out = self._out
        while True:
            now = time.monotonic_ns()
            if until is not None and now >= until:
                # The step clock moves on, unless the output is hopelessly behind.
                if not out or now - self._next_event_ns() <= self.resync_ns:
                    return
            if self.intake:
                free_until = self._next_event_ns() if out else now + _INTAKE_IDLE_NS
                if until is not None and until < free_until:
                    free_until = until
                self._take_requests(max(free_until - _SLACK_NS, now + _INTAKE_MIN_NS))
                continue
            if out and self._next_event_ns() <= now + _SLACK_NS:
                self._write_chunk(out[0])
                if out[0].pos >= len(out[0].seqs):
                    out.popleft()
                await asyncio.sleep(0)  # let requests in and reads happen between chunks
                continue
            if not out and until is None:
                return  # (the intake is empty here)
            target = self._next_event_ns() if out else until
            if until is not None and target is not None and until < target:
                target = until
            assert target is not None
            await self._sleep_until(target)

    def _write_chunk(self, b: OutBatch) -> None:
        """Write up to _CHUNK due events of one step; histogram inlined (runs per event)."""
        hist = self.lateness
        buckets, top = hist.buckets, _N_BUCKETS - 1
        seqs, counts, i, w, due, gap = b.seqs, b.counts, b.pos, b.written, b.due, self.gap_ns
        self.step_end_ns = due
        limit = time.monotonic_ns() + _SLACK_NS
        n_ems = len(seqs)
        stop = min(n_ems, i + _CHUNK)
        count = tokens = worst = 0
        while i < stop:
            at = due + w * gap
            if at > limit:
                limit = time.monotonic_ns() + _SLACK_NS
                if at > limit:
                    break
            seq, n = seqs[i], counts[i]
            i += 1
            sink = seq.sink
            if sink is None or seq.aborted:
                continue
            t = sink.on_tokens(n)
            if t:
                if not w:
                    self.step_lateness.add(max(0, t - due))
                late = t - at
                k = late // _BUCKET_NS if late > 0 else 0
                buckets[k if k < top else top] += 1
                if late > worst:
                    worst = late
                w += 1
                count += 1
                tokens += n
                limit = t + _SLACK_NS
        b.pos = i if i < n_ems else n_ems
        b.written = w
        if count:
            hist.count += count
            hist.max_ns = max(hist.max_ns, worst)
            self.tokens_written += tokens

    async def _sleep_until(self, due: int) -> None:
        delay = due - time.monotonic_ns() - self.spin_ns
        await asyncio.sleep(delay / 1e9 if delay > 0 else 0)
        while time.monotonic_ns() < due:
            pass

    def _next_start(self, due: int) -> int:
        now = time.monotonic_ns()
        if now - due > self.resync_ns:
            self.resyncs += 1
            return now
        return due


def _stamp_admitted(plan: StepPlan, t_start: int) -> None:
    """The step starting at ``t_start`` admitted these: their queueing ended then (a
    preempted sequence keeps its first admission)."""
    for seq in plan.admitted:
        if not seq.t_admit_ns:
            seq.t_admit_ns = t_start


def _plain(value: Any) -> Any:
    if isinstance(value, array):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class TruthLog:
    """One JSON line per finished request; buffered, flushed by a timer and at shutdown."""

    def __init__(self, path: str) -> None:
        self._fh: IO[bytes] = open(path, "ab")  # noqa: SIM115 - lives as long as the server
        self.lines = 0

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(orjson.dumps(record, default=_plain) + b"\n")
        self.lines += 1

    def flush(self) -> None:
        if not self._fh.closed:
            self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()
