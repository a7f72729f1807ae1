"""Drive the self-check's real monitor with the counters a run produces, on injected clocks."""

from __future__ import annotations

from dataclasses import dataclass

from loadkit.selfcheck import SaturationMonitor

MS = 1_000_000
WALL0 = 1_800_000_000 * 10**9


class Clock:
    def __init__(self) -> None:
        self.t = 10**12

    def mono(self) -> int:
        return self.t

    def wall(self) -> int:
        return WALL0 + self.t - 10**12


class FakeStats:
    """What the stats collector keeps of the self-check: warnings and manifest fields."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.manifest: dict = {}

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def set_manifest_fields(self, fields: dict) -> None:
        self.manifest.update(fields)


@dataclass
class Counters:
    """Cumulative counters of one process, advanced a second at a time."""

    cpu_s: float = 0.0
    reads: float = 0.0
    kernel: float = 0.0
    late: float = 0.0
    coalesced: float = 0.0
    firsts: float = 0.0
    first_coalesced: float = 0.0
    events: float = 0.0
    coalesced_events: float = 0.0
    late_coalesced: float = 0.0
    late_coalesced_events: float = 0.0
    first_late_coalesced: float = 0.0
    wait_s: float = 0.0
    pressure_s: float = 0.0


def monitor(clock: Clock, **kw) -> SaturationMonitor:
    return SaturationMonitor(mono_ns=clock.mono, wall_ns=clock.wall, **kw)


def run(mon: SaturationMonitor, clock: Clock, seconds: int, c: Counters, *, lag_ms: float, cpu: float,
        reads_per_s: float = 0, kernel: float = 1.0, late: float = 0.0, coalesced: float = 0.0,
        firsts_per_s: float = 0, first_coalesced: float = 0.0, wait: float | None = None,
        pressure: float | None = None, spike_ms: float | None = None, spike_every: int = 5,
        late_coalesced: float | None = None) -> list[str]:  # fmt: skip
    """``seconds`` of probes every 20 ms at ``lag_ms`` (one ``spike_ms`` every ``spike_every``
    seconds if given: 1 in 250 samples of a window, under its p99),
    ``cpu`` of a core, ``reads_per_s`` of which fractions are kernel-stamped, late and
    coalesced, first tokens, and run-queue wait / CPU pressure as fractions of wall time
    (None: not offered by the kernel). Reads carry one token event each but 10 % (headers,
    end marker), coalesced ones two. ``late_coalesced``: the share of coalesced reads that
    also waited over 1 ms — the client's coalescing; by default as many as of all reads
    (the server's coalescing, independent of the client's own late reads). Returns the
    warnings."""
    out = []
    for second in range(seconds):
        for i in range(50):
            clock.t += 20 * MS
            spike = spike_ms is not None and i == 25 and second % spike_every == 0
            mon.add_lag(int((spike_ms if spike else lag_ms) * MS))
        c.cpu_s += cpu
        c.reads += reads_per_s
        c.kernel += reads_per_s * kernel
        c.late += reads_per_s * kernel * late
        c.coalesced += reads_per_s * coalesced
        c.firsts += firsts_per_s
        c.first_coalesced += firsts_per_s * first_coalesced
        mine = (late if late_coalesced is None else late_coalesced) * kernel
        both = reads_per_s * coalesced
        c.events += reads_per_s * 0.9 + both
        c.coalesced_events += 2 * both
        c.late_coalesced += both * mine
        c.late_coalesced_events += 2 * both * mine
        c.first_late_coalesced += firsts_per_s * first_coalesced * mine
        c.wait_s += wait or 0.0
        c.pressure_s += pressure or 0.0
        counts = tuple(int(v) for v in (c.reads, c.kernel, c.late, c.coalesced, c.firsts, c.first_coalesced, c.events,
                                        c.coalesced_events, c.late_coalesced, c.late_coalesced_events,
                                        c.first_late_coalesced))  # fmt: skip
        msg = mon.evaluate(c.cpu_s, counts, wait_s=None if wait is None else c.wait_s,
                           pressure_s=None if pressure is None else c.pressure_s, full_gcs=0)  # fmt: skip
        if msg:
            out.append(msg)
    return out
