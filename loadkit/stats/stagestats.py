"""Per-stage stats and the sweep analysis: the latency–throughput curve, where an engine
saturates, and the highest load that still meets the SLOs.

A stage is a span of the run at one load level (users in closed loop, a rate in open loop).
Requests are attributed to the stage they were sent in. Histograms merge exactly, so workers
ship cumulative snapshots and the master sums them.

Saturation: going up the levels, the first level where throughput grows by less than
`min_gain` (10%) over the previous level while TTFT p50 grows by more than `min_latency_rise`
(25%) — the engine stopped doing more work and started queueing it. The goodput level: the
highest level whose SLO attainment (good / judged, judged as every view does: stats/metrics.py)
is at least `attainment_target` (90%, DistServe's convention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.histogram import Histogram
from loadkit.stats.metrics import (
    SLO_SLOT,
    STAGE_METRICS,
    Compiled,
    SloLike,
    _is_compiled,
    compile_slos,
    judge,
    meets,
    slo_values_ns,
)
from loadkit.types import OK

# 2: the histograms hold ns (the engine sections' resolution), no longer µs.
WIRE_VERSION = 2
METRICS = STAGE_METRICS  # stats/metrics.py; the first four of metrics.SLO_KEYS, in that order
# Time to first answer token beside them (a reasoning run's TTFT is its first reasoning token, so
# report.html shows TTFAT too). Reported only when measured; a cell from a worker that did not
# send it merges as empty, so the wire version stays.
TTFAT = "ttfat_ms"
HISTS = (*METRICS, TTFAT)
COUNTERS = ("requests", "ok", "output_tokens", "judged", "good")


@dataclass
class StageCell:
    hists: dict[str, Histogram] = field(default_factory=lambda: {m: Histogram() for m in HISTS})
    requests: int = 0
    ok: int = 0
    output_tokens: int = 0
    judged: int = 0
    good: int = 0

    def add(self, r: RequestRecord, slos: SloLike | Compiled | None) -> None:
        """Count ``r``; with SLOs, judge it as every view does (metrics.meets)."""
        self.requests += 1
        if r.outcome != OK:
            if slos:
                verdict = meets(r, slos)
                self.judged += verdict is not None
                self.good += verdict is True
            return
        # The engine sections' values (the request's metrics, computed once, in ns), so a
        # stage's percentiles are those of the same requests in report.json's engine section.
        values = slo_values_ns(r)
        if slos:
            self.judged += 1
            self.good += judge(values, slos if _is_compiled(slos) else compile_slos(slos))  # type: ignore[arg-type]
        self.ok += 1
        self.output_tokens += r.n_out or 0
        for name, value in zip(METRICS, values, strict=False):
            if value is not None:
                self.hists[name].record(value)
        ttfat = values[SLO_SLOT[TTFAT]]
        if ttfat is not None:
            self.hists[TTFAT].record(ttfat)

    def merge(self, other: StageCell) -> None:
        for name in HISTS:
            self.hists[name].merge(other.hists[name])
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_wire(self) -> dict[str, Any]:
        return {
            "v": WIRE_VERSION,
            "hists": {m: h.to_wire() for m, h in self.hists.items()},
            **{c: getattr(self, c) for c in COUNTERS},
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> StageCell:
        # A cell of an older worker holds µs: merged with ns it would be off 1000-fold.
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"stage/tenant cell payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        hists = data["hists"]
        cell = cls(
            {m: Histogram.from_wire(hists[m]) if m in hists or m != TTFAT else Histogram() for m in HISTS}
        )
        for c in COUNTERS:
            setattr(cell, c, int(data[c]))
        return cell

    def summary(self, duration_s: float | None) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": self.requests, "ok": self.ok, "output_tokens": self.output_tokens}
        for name, hist in self.hists.items():
            if name == TTFAT and not hist.count:
                continue
            q = hist.percentiles([0.5, 0.9, 0.99]) if hist.count else [None] * 3
            out[name] = {
                k: (None if v is None else v / 1e6) for k, v in zip(("p50", "p90", "p99"), q, strict=True)
            }
        rate = duration_s if duration_s and duration_s > 0 else None
        out["requests_per_s"] = self.ok / rate if rate else None
        out["output_tokens_per_s"] = self.output_tokens / rate if rate else None
        out["slo_attainment"] = self.good / self.judged if self.judged else None
        out["goodput_rps"] = self.good / rate if rate and self.judged else None
        return out


class StageStats:
    def __init__(self, slos: dict[str, float] | None = None) -> None:
        self.slos = dict(slos or {})
        self._compiled = compile_slos(self.slos)
        self.cells: dict[tuple[str, str], StageCell] = {}

    def add(self, r: RequestRecord) -> None:
        if r.stage is None:
            return
        cell = self.cells.get((r.engine, r.stage))
        if cell is None:  # not setdefault: a cell built per request is four histograms thrown away
            cell = self.cells[(r.engine, r.stage)] = StageCell()
        cell.add(r, self._compiled)

    def merge(self, other: StageStats) -> None:
        for key, cell in other.cells.items():
            self.cells.setdefault(key, StageCell()).merge(cell)

    def to_wire(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "cells": [[e, s, c.to_wire()] for (e, s), c in self.cells.items()]}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> StageStats:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"stage stats payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        for engine, stage, cell in data["cells"]:
            out.cells[(engine, stage)] = StageCell.from_wire(cell)
        return out

    def report(self, plan: list[dict[str, Any]], attainment_target: float = 0.90) -> dict[str, Any]:
        """Per engine: each planned stage in order with its level and figures, plus the sweep analysis."""
        out: dict[str, Any] = {}
        for engine in sorted({e for e, _ in self.cells}):
            rows = []
            for stage in plan:
                cell = self.cells.get((engine, stage["name"]))
                summary = cell.summary(stage.get("duration_s")) if cell else None
                rows.append({**stage, "stats": summary})
            measured = [r for r in rows if not r.get("warmup")]
            out[engine] = {"stages": rows, "analysis": analyse(measured, attainment_target=attainment_target)}
        return out


def analyse(
    rows: list[dict[str, Any]],
    min_gain: float = 0.10,
    min_latency_rise: float = 0.25,
    attainment_target: float = 0.90,
) -> dict[str, Any]:
    """Saturation and goodput level over stages ordered by increasing load."""
    usable = [r for r in rows if r["stats"] and r["stats"]["output_tokens_per_s"] is not None]
    saturation = None
    for prev, cur in zip(usable, usable[1:], strict=False):
        tp0, tp1 = prev["stats"]["output_tokens_per_s"], cur["stats"]["output_tokens_per_s"]
        lat0, lat1 = prev["stats"]["ttft_ms"]["p50"], cur["stats"]["ttft_ms"]["p50"]
        if (
            tp0
            and lat0
            and lat1 is not None
            and tp1 < tp0 * (1 + min_gain)
            and lat1 > lat0 * (1 + min_latency_rise)
        ):
            saturation = {"stage": cur["name"], "level": cur.get("level"), "previous_level": prev.get("level"),
                          "throughput_gain": tp1 / tp0 - 1, "ttft_p50_rise": lat1 / lat0 - 1}  # fmt: skip
            break
    best = None
    for r in usable:
        att = r["stats"]["slo_attainment"]
        if att is not None and att >= attainment_target:
            best = {"stage": r["name"], "level": r.get("level"), "slo_attainment": att,
                    "goodput_rps": r["stats"]["goodput_rps"]}  # fmt: skip
    return {
        "saturation": saturation,
        "max_load_meeting_slos": best,
        "rule": f"saturated: throughput gain < {min_gain:.0%} while TTFT p50 rises > {min_latency_rise:.0%}; "
        f"SLOs met: attainment >= {attainment_target:.0%}",
    }


def stage_plan(arrival: dict[str, Any], warmup_s: float = 0.0) -> list[dict[str, Any]]:
    """The stages a scenario's arrival spec describes, each with its name, level and duration."""
    model = arrival.get("model", "closed")
    level_key = "users" if model == "closed" else "rate"
    plan: list[dict[str, Any]] = []
    if warmup_s > 0:
        plan.append({"name": "warmup", "level": None, "duration_s": warmup_s, "warmup": True})
    stages = arrival.get("stages") or []
    for i, s in enumerate(stages):
        plan.append({"name": str(s.get("name") or f"stage{i + 1}"), "level": s.get(level_key),
                     "level_kind": level_key, "duration_s": float(s["duration_s"])})  # fmt: skip
    return plan
