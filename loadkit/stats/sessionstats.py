"""Session-level stats: how multi-turn sessions ended, and what each turn index saw.

Per target: sessions completed or broken (at which turn, by which outcome); per turn index,
TTFT of ok turns (exact-merge histogram), and the prefix the workload expected to be cached
against what the server reported as cached. Cumulative and mergeable like the request stats,
so workers ship snapshots and the master sums them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadkit.records import RequestRecord, metrics_of
from loadkit.stats.histogram import Histogram
from loadkit.types import OK

MAX_TURN = 32  # turns past this share one bucket: memory stays bounded
WIRE_VERSION = 1


def turn_key(turn: int) -> str:
    return str(turn) if turn < MAX_TURN else f"{MAX_TURN}+"


@dataclass
class TurnStats:
    ttft_ns: Histogram = field(default_factory=Histogram)
    requests: int = 0
    ok: int = 0
    n_in: int = 0
    expected_cached: int = 0
    reported_cached: int = 0
    reported: int = 0  # ok turns whose server reported cached tokens
    # Time to first answer token (beside TTFT, the first reasoning token in a reasoning run).
    ttfat_ns: Histogram = field(default_factory=Histogram)

    def add(self, r: RequestRecord) -> None:
        self.requests += 1
        if r.outcome != OK:
            return
        self.ok += 1
        m = metrics_of(r)  # the request's TTFT and TTFAT as every view records them
        if m.ttft_ns is not None:
            self.ttft_ns.record(m.ttft_ns)
        if m.ttfat_ns is not None:
            self.ttfat_ns.record(m.ttfat_ns)
        if r.n_in is not None:
            self.n_in += r.n_in
        self.expected_cached += r.expected_cached_tokens or 0
        if r.cached_tokens is not None:
            self.reported_cached += r.cached_tokens
            self.reported += 1

    def merge(self, other: TurnStats) -> None:
        self.ttft_ns.merge(other.ttft_ns)
        self.ttfat_ns.merge(other.ttfat_ns)
        for name in ("requests", "ok", "n_in", "expected_cached", "reported_cached", "reported"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_wire(self) -> dict[str, Any]:
        return {
            "ttft_ns": self.ttft_ns.to_wire(),
            "ttfat_ns": self.ttfat_ns.to_wire(),
            **{
                k: getattr(self, k)
                for k in ("requests", "ok", "n_in", "expected_cached", "reported_cached", "reported")
            },
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TurnStats:
        out = cls(Histogram.from_wire(data["ttft_ns"]))
        for k in ("requests", "ok", "n_in", "expected_cached", "reported_cached", "reported"):
            setattr(out, k, int(data[k]))
        if "ttfat_ns" in data:  # absent from a worker that did not record it: merges as empty
            out.ttfat_ns = Histogram.from_wire(data["ttfat_ns"])
        return out

    def summary(self) -> dict[str, Any]:
        out = {
            "requests": self.requests,
            "ok": self.ok,
            "ttft_ms": _latency(self.ttft_ns),
            "prefix_expected_ratio": self.expected_cached / self.n_in if self.n_in else None,
            "prefix_reported_ratio": self.reported_cached / self.n_in
            if self.n_in and self.reported
            else None,
            "expected_cached_tokens": self.expected_cached,
            "reported_cached_tokens": self.reported_cached if self.reported else None,
        }
        if self.ttfat_ns.count:  # reported when measured
            out["ttfat_ms"] = _latency(self.ttfat_ns)
        return out


def _latency(h: Histogram) -> dict[str, Any]:
    """count and nearest-rank p50, p90, p99 in ms of a histogram of ns."""
    q = h.percentiles([0.5, 0.9, 0.99]) if h.count else [None] * 3
    ms = [None if v is None else v / 1e6 for v in q]
    return {"count": h.count, "p50": ms[0], "p90": ms[1], "p99": ms[2]}


@dataclass
class EngineSessions:
    completed: int = 0
    broken: int = 0
    broken_by: dict[str, int] = field(default_factory=dict)
    broken_at_turn: dict[str, int] = field(default_factory=dict)
    ended_by: dict[str, int] = field(default_factory=dict)
    turns: dict[str, TurnStats] = field(default_factory=dict)

    def merge(self, other: EngineSessions) -> None:
        self.completed += other.completed
        self.broken += other.broken
        for mine, theirs in ((self.broken_by, other.broken_by), (self.broken_at_turn, other.broken_at_turn),
                             (self.ended_by, other.ended_by)):  # fmt: skip
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        for k, ts in other.turns.items():
            self.turns.setdefault(k, TurnStats()).merge(ts)


class SessionStats:
    def __init__(self) -> None:
        self.engines: dict[str, EngineSessions] = {}

    def add_turn(self, record: RequestRecord) -> None:
        if record.turn is None:
            return
        eng = self.engines.setdefault(record.engine, EngineSessions())
        eng.turns.setdefault(turn_key(record.turn), TurnStats()).add(record)

    def add_session(
        self, engine: str, status: str, turns_sent: int, reason: str | None, end: str | None
    ) -> None:
        eng = self.engines.setdefault(engine, EngineSessions())
        if status == "broken":
            eng.broken += 1
            key = reason or "unknown"
            eng.broken_by[key] = eng.broken_by.get(key, 0) + 1
            t = turn_key(max(1, turns_sent))
            eng.broken_at_turn[t] = eng.broken_at_turn.get(t, 0) + 1
        else:
            eng.completed += 1
            key = end or "completed"
            eng.ended_by[key] = eng.ended_by.get(key, 0) + 1

    def merge(self, other: SessionStats) -> None:
        for name, eng in other.engines.items():
            self.engines.setdefault(name, EngineSessions()).merge(eng)

    def to_wire(self) -> dict[str, Any]:
        return {
            "v": WIRE_VERSION,
            "engines": {
                name: {
                    "completed": e.completed,
                    "broken": e.broken,
                    "broken_by": e.broken_by,
                    "broken_at_turn": e.broken_at_turn,
                    "ended_by": e.ended_by,
                    "turns": {k: t.to_wire() for k, t in e.turns.items()},
                }
                for name, e in self.engines.items()
            },
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SessionStats:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"session stats payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        for name, e in data["engines"].items():
            out.engines[name] = EngineSessions(
                int(e["completed"]),
                int(e["broken"]),
                dict(e["broken_by"]),
                dict(e["broken_at_turn"]),
                dict(e["ended_by"]),
                {k: TurnStats.from_wire(t) for k, t in e["turns"].items()},
            )
        return out

    def report(self) -> dict[str, Any]:
        def order(k: str) -> int:
            return int(k.rstrip("+"))

        return {
            name: {
                "sessions": e.completed + e.broken,
                "completed": e.completed,
                "broken": e.broken,
                "broken_by": e.broken_by,
                "broken_at_turn": e.broken_at_turn,
                "ended_by": e.ended_by,
                "turns": {k: e.turns[k].summary() for k in sorted(e.turns, key=order)},
            }
            for name, e in self.engines.items()
        }
