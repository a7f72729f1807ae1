"""The open-loop schedules' counts (the manifest's ``schedule``), as a section of the stats.

Each process that holds schedules (one process alone, or each worker holding its share) sets
its counts here at test stop, before its final snapshot: per (scenario-prefixed) target, the
slots its schedule reached, those dropped, the sends late and the slots no free user took, the
warm-up's own counts, and the histogram of every send's lag. They travel to the master like
every section and sum exactly there (the lags' histograms merge bucket by bucket), so a
distributed master's manifest carries the same figures as one process's (issue 31).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadkit.stats.histogram import Histogram

WARMUP_KEYS = ("scheduled", "sent", "dropped")


@dataclass(slots=True)
class TargetTally:
    """One target's schedule counts on one process (or summed over processes)."""

    scheduled: int = 0
    dropped: int = 0
    late: int = 0
    no_free_user: int = 0
    warmup: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WARMUP_KEYS, 0))
    lag: Histogram = field(default_factory=Histogram)  # ns, of every request actually sent

    def merge(self, other: TargetTally) -> None:
        self.scheduled += other.scheduled
        self.dropped += other.dropped
        self.late += other.late
        self.no_free_user += other.no_free_user
        for key in WARMUP_KEYS:
            self.warmup[key] = self.warmup.get(key, 0) + other.warmup.get(key, 0)
        self.lag.merge(other.lag)

    def summary(self) -> dict[str, Any]:
        """The manifest's figures for this target (lags in ms, nearest rank from the histogram)."""
        q = self.lag.percentiles([0.5, 0.9, 0.99]) if self.lag.count else [None, None, None]
        to_ms = [None if v is None else v / 1e6 for v in q]
        return {
            "scheduled": self.scheduled,
            "sent": self.lag.count,
            "dropped": self.dropped,
            "late": self.late,
            "no_free_user": self.no_free_user,
            "lag_p50_ms": to_ms[0],
            "lag_p90_ms": to_ms[1],
            "lag_p99_ms": to_ms[2],
            "lag_max_ms": None if self.lag.max is None else self.lag.max / 1e6,
            **({"warmup": dict(self.warmup)} if self.warmup.get("scheduled") else {}),
        }

    def to_wire(self) -> dict[str, Any]:
        return {"scheduled": self.scheduled, "dropped": self.dropped, "late": self.late,
                "no_free_user": self.no_free_user, "warmup": dict(self.warmup),
                "lag": self.lag.to_wire()}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TargetTally:
        warmup = {key: int(data["warmup"].get(key, 0)) for key in WARMUP_KEYS}
        return cls(int(data["scheduled"]), int(data["dropped"]), int(data["late"]),
                   int(data["no_free_user"]), warmup, Histogram.from_wire(data["lag"]))  # fmt: skip


class ScheduleTally:
    """Every target's counts, and how many processes' final counts are in them (``nodes``: 0
    until a process sets its own at test stop, then 1, summed by merging)."""

    def __init__(self, targets: dict[str, TargetTally] | None = None, nodes: int = 0) -> None:
        self.targets: dict[str, TargetTally] = dict(targets or {})
        self.nodes = nodes

    def merge(self, other: ScheduleTally) -> None:
        for name, tally in other.targets.items():
            self.targets.setdefault(name, TargetTally()).merge(tally)
        self.nodes += other.nodes

    def summary(self) -> dict[str, dict[str, Any]]:
        return {name: tally.summary() for name, tally in self.targets.items()}

    def to_wire(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "targets": {name: t.to_wire() for name, t in self.targets.items()}}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScheduleTally:
        targets = {str(name): TargetTally.from_wire(t) for name, t in (data.get("targets") or {}).items()}
        return cls(targets, int(data.get("nodes", 0)))
