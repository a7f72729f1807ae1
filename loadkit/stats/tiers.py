"""SLO tiers: several SLO sets judged on every request at once, and per tier the highest stage
(users or rate) whose attainment under that tier is at least the goodput threshold.

An SLO over two metrics (TTFT and TPOT) needs each request judged on both at once, which
histograms cannot give back; so each tier keeps counters, per (target, stage) and for the whole
measured run, filled as requests arrive. Counters merge exactly (a sum), so a distributed run
gives the same counts as a single process and as ``loadkit verify`` recomputes from the raw log.
A request is judged as every view judges it (stats/metrics.py ``meets``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.metrics import SLO_KEYS, Compiled, Slo, compile_slos, meets
from loadkit.types import OK

WIRE_VERSION = 1
WHOLE_RUN = ""  # the cell key of the whole measured run (a stage name is never empty)
ATTAINMENT_TARGET = 0.90  # the sweep's goodput threshold (stats/stagestats.py analyse)
# The run's own --slo / [slos], kept as a tier too so its goodput tokens (cost per good token) exist.
RUN_TIER = "run_slos"
TIER_OPTION = "--slo-tier"


@dataclass(frozen=True, slots=True)
class SloTier:
    """A named set of SLOs (``--slo-tier NAME:KEY=MS,...`` or a scenario's ``[[slo_tiers]]``)."""

    name: str
    slos: tuple[Slo, ...]

    @property
    def limits(self) -> dict[str, float]:
        return {s.key: s.limit_ms for s in self.slos}


def parse_tier(text: str, where: str = TIER_OPTION) -> SloTier:
    """``NAME:ttft_ms=500,tpot_ms=50`` → SloTier; ValueError naming ``where`` and the bad part."""
    name, sep, rest = str(text).partition(":")
    name = name.strip()
    if not sep or not name:
        raise ValueError(
            f"{where} {text!r}: expected NAME:KEY=MS[,KEY=MS...], e.g. tight:ttft_ms=200,tpot_ms=30"
        )
    if name == RUN_TIER:
        raise ValueError(f"{where} {text!r}: the name {RUN_TIER!r} is the run's own --slo; choose another")
    slos: dict[str, Slo] = {}
    for part in (p.strip() for p in rest.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in SLO_KEYS:
            raise ValueError(
                f"{where} {text!r}: bad part {part!r}; want KEY=MS with KEY one of {', '.join(SLO_KEYS)}"
            )
        try:
            limit = float(value)
        except ValueError:
            raise ValueError(
                f"{where} {text!r}: bad part {part!r}: {value.strip()!r} is not a number of ms"
            ) from None
        if not limit > 0:
            raise ValueError(f"{where} {text!r}: bad part {part!r}: the limit must be > 0 ms")
        slos[key] = Slo(key, limit)
    if not slos:
        raise ValueError(f"{where} {text!r}: tier {name!r} names no SLO (KEY=MS)")
    return SloTier(name, tuple(slos.values()))


def validated_tier(text: str) -> str:
    """argparse type for --slo-tier: checked now, kept as text (parsed options cross to workers)."""
    try:
        parse_tier(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def parse_tiers(items: list[str] | tuple[str, ...]) -> tuple[SloTier, ...]:
    """Every --slo-tier; a name given twice is an error (tiers are keyed by name)."""
    tiers: dict[str, SloTier] = {}
    for item in items:
        tier = parse_tier(item)
        if tier.name in tiers:
            raise ValueError(f"{TIER_OPTION}: tier {tier.name!r} given twice")
        tiers[tier.name] = tier
    return tuple(tiers.values())


CompiledTiers = tuple[tuple[str, Compiled], ...]


def compile_tiers(tiers: tuple[SloTier, ...], run_slos: tuple[Slo, ...] = ()) -> CompiledTiers:
    """Once per run: each tier's SLOs compiled, the run's own SLOs as RUN_TIER first."""
    out = [(RUN_TIER, compile_slos(run_slos))] if run_slos else []
    return tuple(out + [(t.name, compile_slos(t.slos)) for t in tiers])


class TierStats:
    """Per (target, stage) cell, per tier: [judged, good, output tokens of good requests].
    The stage ``WHOLE_RUN`` counts every measured request."""

    def __init__(self) -> None:
        self.cells: dict[tuple[str, str], dict[str, list[int]]] = {}

    def add(self, r: RequestRecord, tiers: CompiledTiers, staged: bool) -> None:
        if not tiers:
            return
        verdicts = [(name, meets(r, slos)) for name, slos in tiers]
        tokens = (r.n_out or 0) if r.outcome == OK else 0
        self._count((r.engine, WHOLE_RUN), verdicts, tokens)
        if staged and r.stage is not None:
            self._count((r.engine, r.stage), verdicts, tokens)

    def _count(self, key: tuple[str, str], verdicts: list[tuple[str, bool | None]], tokens: int) -> None:
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = {}
        for name, verdict in verdicts:
            if verdict is None:
                continue
            counts = cell.get(name)
            if counts is None:
                counts = cell[name] = [0, 0, 0]
            counts[0] += 1
            if verdict:
                counts[1] += 1
                counts[2] += tokens

    def merge(self, other: TierStats) -> None:
        for key, cell in other.cells.items():
            mine = self.cells.setdefault(key, {})
            for name, counts in cell.items():
                have = mine.setdefault(name, [0, 0, 0])
                for i in range(3):
                    have[i] += counts[i]

    def to_wire(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "cells": [[e, s, {n: list(c) for n, c in cell.items()}]
                                             for (e, s), cell in self.cells.items()]}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TierStats:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"slo tier payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        for engine, stage, cell in data["cells"]:
            out.cells[(str(engine), str(stage))] = {str(n): [int(x) for x in c] for n, c in cell.items()}
        return out

    def counts(self, engine: str, stage: str, tier: str) -> tuple[int, int, int]:
        judged, good, tokens = (self.cells.get((engine, stage)) or {}).get(tier, (0, 0, 0))
        return judged, good, tokens


def _rate(n: int, seconds: float | None) -> float | None:
    return n / seconds if seconds else None


def tier_figures(judged: int, good: int, good_tokens: int, seconds: float | None) -> dict[str, Any]:
    """One tier's figures over ``seconds`` (a stage's planned duration, or the run's window)."""
    return {"judged": judged, "good": good, "attainment": good / judged if judged else None,
            "goodput_rps": _rate(good, seconds) if judged else None,
            "good_output_tokens": good_tokens,
            "good_output_tokens_per_s": _rate(good_tokens, seconds) if judged else None}  # fmt: skip


def tiers_report(stats: TierStats, tiers: tuple[SloTier, ...], run_slos: tuple[Slo, ...],
                 plan: list[dict[str, Any]], stage_rows: Mapping[str, Any],
                 windows: Mapping[str, float | None],
                 attainment_target: float = ATTAINMENT_TARGET) -> dict[str, Any]:  # fmt: skip
    """Per target: each tier's whole-run figures (over the engine section's window), its figures
    per planned measured stage (over the stage's duration) and the highest stage whose
    attainment is ≥ ``attainment_target`` (``max_load``, None when none is). ``stage_rows``: the
    stages section's report (its per-stage throughput is quoted at the max load)."""
    named = ([SloTier(RUN_TIER, run_slos)] if run_slos else []) + list(tiers)
    measured = [s for s in plan if not s.get("warmup")]
    out: dict[str, Any] = {}
    for engine in sorted({e for e, _ in stats.cells}):
        rows = {row["name"]: row for row in (stage_rows.get(engine) or {}).get("stages") or []}
        entries = []
        for tier in named:
            whole = tier_figures(*stats.counts(engine, WHOLE_RUN, tier.name), windows.get(engine))
            stages, best = [], None
            for stage in measured:
                fig = tier_figures(*stats.counts(engine, stage["name"], tier.name), stage.get("duration_s"))
                throughput = (rows.get(stage["name"]) or {}).get("stats") or {}
                row = {"stage": stage["name"], "level": stage.get("level"), "level_kind": stage.get("level_kind"),
                       **fig, "requests_per_s": throughput.get("requests_per_s"),
                       "output_tokens_per_s": throughput.get("output_tokens_per_s")}  # fmt: skip
                stages.append(row)
                # The levels go up stage by stage (docs/load-models.md): the last one that meets is the max.
                if fig["attainment"] is not None and fig["attainment"] >= attainment_target:
                    best = row
            entries.append({"name": tier.name, "slos": tier.limits, "whole_run": whole,
                            "stages": stages, "max_load": best})  # fmt: skip
        out[engine] = {"tiers": entries}
    return {"attainment_target": attainment_target, "by_target": out} if out else {}
