"""The worker→master path: versioned cumulative snapshots and the master's table of them.

Each worker sends its WHOLE collector state (cumulative since the run started) with every
report, numbered by a per-process sequence number and tagged with the worker's reset epoch.
The master keeps only the newest snapshot per worker and merges the set on demand, so an
interval Locust cleared, a duplicate, or a report overtaken by a newer one costs nothing: the
next snapshot carries everything. A worker that disappears keeps the data of its last
snapshot and is marked lost with the time and its last sequence number.

Two parts that only grow are the exception, sent as deltas in periodic snapshots and whole in
the final one: the time series' changed rows, and the delivered-load section's new requests
(each delta covers two intervals, so one lost snapshot costs nothing; stats/delivered.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from loadkit.stats.aggregate import GroupStats
from loadkit.stats.sections import Section, continue_sections, decode_sections, encode_sections

# 2: the report sections (stages, sessions, ...) ride in "sections"; 3: periodic snapshots
# carry the delivered-load section as a delta (stats/delivered.py); 4: histograms' buckets
# packed as bytes (stats/histogram.py)
PAYLOAD_VERSION = 4
PAYLOAD_KEY = "loadkit"  # key of our payload inside Locust's report_to_master data dict


class PayloadError(ValueError):
    """A snapshot the master cannot use (unknown version, malformed)."""


@dataclass(slots=True)
class NodeSnapshot:
    """One node's cumulative state as it crossed the wire, decoded."""

    groups: dict[tuple[str, str], GroupStats]
    scheduled: int = 0
    dropped: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Why this node found the run invalid (StatsCollector.mark_invalid: a breaker, a plugin).
    invalid: list[str] = field(default_factory=list)
    # The registered sections' states (stages, sessions, ...: stats/sections.py), by name.
    sections: dict[str, Any] = field(default_factory=dict)


def encode_snapshot(node: NodeSnapshot, *, seq: int, epoch: int, worker: int | None,
                    final: bool, wall_ns: int | None = None) -> dict[str, Any]:  # fmt: skip
    """The versioned, msgpack-able dict a worker sends (histograms' buckets are bytes)."""
    return {
        "v": PAYLOAD_VERSION,
        "seq": seq,
        "epoch": epoch,
        "worker": worker,
        "final": final,
        "wall_ns": time.time_ns() if wall_ns is None else wall_ns,
        "scheduled": node.scheduled,
        "dropped": node.dropped,
        "errors": list(node.errors),
        "warnings": list(node.warnings),
        "invalid": list(node.invalid),
        # Periodic snapshots carry only changed time-series rows; the final one carries all.
        "series_delta": not final,
        "groups": [
            [engine, label, g.to_wire(series_delta=not final)] for (engine, label), g in node.groups.items()
        ],
        # ... and the sections that only grow (delivered load) their new part, mostly.
        "sections": encode_sections(node.sections, delta=not final),
    }


def decode_snapshot(payload: dict[str, Any], sections: dict[str, Section] | None = None) -> NodeSnapshot:
    if not isinstance(payload, dict) or payload.get("v") != PAYLOAD_VERSION:
        version = payload.get("v") if isinstance(payload, dict) else type(payload).__name__
        raise PayloadError(f"stats payload version {version!r}, this loadkit speaks {PAYLOAD_VERSION}")
    try:
        groups = {(e, lbl): GroupStats.from_wire(g) for e, lbl, g in payload["groups"]}
        states = decode_sections(payload.get("sections") or {}, sections or {})
        return NodeSnapshot(groups, payload["scheduled"], payload["dropped"],
                            list(payload["errors"]), list(payload["warnings"]),
                            list(payload.get("invalid") or []), states)  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PayloadError(f"malformed stats payload: {exc!r}") from exc


def _apply_series_deltas(previous: NodeSnapshot, new: NodeSnapshot) -> None:
    """Give ``new`` (a delta snapshot) the previous time series updated with its rows."""
    for key, group in new.groups.items():
        old = previous.groups.get(key)
        if old is not None:
            old.series.apply_rows(group.series.to_wire(), group.series.dropped)
            group.series = old.series


@dataclass(slots=True)
class WorkerState:
    client_id: str
    index: int | None = None
    seq: int = -1
    epoch: int = 0
    min_epoch: int = 0  # snapshots from an epoch before the last reset are stale
    final: bool = False
    last_report_wall: float | None = None
    lost_at: float | None = None
    lost_reason: str | None = None
    recovered: int = 0
    snapshot: NodeSnapshot | None = None

    def describe(self) -> dict[str, Any]:
        status = "lost" if self.lost_at is not None else "final" if self.final else "reporting"
        return {"client_id": self.client_id, "index": self.index, "status": status,
                "last_seq": self.seq, "epoch": self.epoch, "last_report_unix": self.last_report_wall,
                "lost_at_unix": self.lost_at, "lost_reason": self.lost_reason,
                "recovered": self.recovered}  # fmt: skip


class RemoteSnapshots:
    """The master's view: the newest snapshot of every worker, merged on demand."""

    def __init__(self, sections: dict[str, Section] | None = None) -> None:
        self.workers: dict[str, WorkerState] = {}
        self.rejected: list[str] = []
        # The collector's section registry (shared, so sections registered later count).
        self.sections: dict[str, Section] = {} if sections is None else sections

    def accept(self, client_id: str, payload: dict[str, Any], now: float | None = None) -> str:
        """Take a worker's snapshot; returns "accepted", "stale" or "rejected" (bad payload)."""
        state = self.workers.get(client_id)
        if state is None:
            state = self.workers[client_id] = WorkerState(client_id)
        seq, epoch = payload.get("seq", -1), payload.get("epoch", 0)
        if epoch < state.min_epoch or (epoch == state.epoch and seq <= state.seq) or epoch < state.epoch:
            return "stale"
        try:
            snapshot = decode_snapshot(payload, self.sections)
        except PayloadError as exc:
            self.rejected.append(f"worker {client_id}: {exc}")
            return "rejected"
        self._store(state, payload, snapshot, time.time() if now is None else now)
        return "accepted"

    def _store(self, state: WorkerState, payload: dict[str, Any], snapshot: NodeSnapshot, now: float) -> None:
        same_epoch = state.snapshot is not None and payload["epoch"] == state.epoch
        if payload.get("series_delta") and same_epoch:
            assert state.snapshot is not None
            _apply_series_deltas(state.snapshot, snapshot)
        # Sections sent as deltas are appended to the worker's running state (a new epoch, or
        # the first snapshot: onto nothing).
        continue_sections(snapshot.sections, state.snapshot.sections if same_epoch and state.snapshot else {})
        state.seq, state.epoch = payload["seq"], payload["epoch"]
        state.index = payload.get("worker", state.index)
        state.final = bool(payload.get("final"))
        state.snapshot = snapshot
        state.last_report_wall = now
        if state.lost_at is not None:  # came back (Locust self-heals a missing worker)
            state.lost_at, state.lost_reason = None, None
            state.recovered += 1

    def mark_lost(self, client_id: str, reason: str, now: float | None = None) -> bool:
        """Mark a worker that has not sent its final snapshot as lost; True if newly marked."""
        state = self.workers.get(client_id)
        if state is None:
            state = self.workers[client_id] = WorkerState(client_id)
        if state.final or state.lost_at is not None:
            return False
        state.lost_at, state.lost_reason = (time.time() if now is None else now), reason
        return True

    def pending_finals(self) -> list[str]:
        """Workers we know of that still owe a final snapshot (lost ones owe nothing)."""
        return [w.client_id for w in self.workers.values() if not w.final and w.lost_at is None]

    def reset(self) -> None:
        """A new run (or a stats reset): forget data, keep sequence tracking, drop lost workers."""
        for client_id in [c for c, w in self.workers.items() if w.lost_at is not None]:
            del self.workers[client_id]
        for state in self.workers.values():
            state.min_epoch = state.epoch + 1
            state.snapshot, state.final = None, False

    def snapshots(self) -> list[NodeSnapshot]:
        return [w.snapshot for w in self.workers.values() if w.snapshot is not None]

    def describe(self) -> list[dict[str, Any]]:
        return sorted((w.describe() for w in self.workers.values()),
                      key=lambda d: (d["index"] is None, d["index"] or 0, d["client_id"]))  # fmt: skip

    def lost(self) -> list[WorkerState]:
        return [w for w in self.workers.values() if w.lost_at is not None]
