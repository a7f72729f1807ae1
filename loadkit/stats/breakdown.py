"""BreakdownStats: the server-side breakdown of one (engine, label)'s ok requests (issue 26).

Each ok request's engine timings are normalised and joined with its TTFT
(loadkit.core.servertimings) and recorded into one histogram per stage, in ns as every other time
histogram. Requests whose engine reported nothing are counted, never recorded as zeros. The
report section gives p50/p90/p99 per stage and which stage dominates TTFT and E2E, in the
seeds' terms: prefill is compute-bound, decode memory-bound, queueing a capacity limit.
Mergeable exactly, like GroupStats; one ``add`` per request, nothing per event.
"""

from __future__ import annotations

from typing import Any

from loadkit.core.servertimings import join
from loadkit.records import RequestRecord, ttft_ms
from loadkit.stats.histogram import Histogram

# Histogrammed figures of the normalised breakdown (ms there, ns here).
METRICS = ("queue_ms", "load_ms", "prefill_ms", "decode_ms", "decode_per_token_ms", "residual_ttft_ms",
           "server_total_ms")  # fmt: skip
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
# What each stage stands for when it dominates (the seeds' terms).
MEANING = {
    "queue_ms": "queue: waiting for capacity",
    "load_ms": "model load",
    "prefill_ms": "prefill: compute-bound",
    "decode_ms": "decode: memory-bound",
    "residual_ttft_ms": "network + client",
}
TTFT_PARTS = ("queue_ms", "load_ms", "prefill_ms", "residual_ttft_ms")
E2E_PARTS = ("queue_ms", "load_ms", "prefill_ms", "decode_ms", "residual_ttft_ms")


class BreakdownStats:
    __slots__ = ("hists", "reported", "not_reported", "sources", "negative_residuals")

    def __init__(self) -> None:
        self.hists: dict[str, Histogram] = {}
        self.reported = 0
        self.not_reported = 0
        self.sources: dict[str, int] = {}
        # Residual TTFT below zero: the engine's timings exceed what the client saw (clock or
        # rounding on the server's side); recorded as 0 by the histogram, counted here.
        self.negative_residuals = 0

    def add(self, r: RequestRecord) -> None:
        """Count one ok request."""
        b = join(r.server_timings, ttft_ms(r)) if r.server_timings is not None else None
        if b is None:
            self.not_reported += 1
            return
        self.reported += 1
        self.sources[b["source"]] = self.sources.get(b["source"], 0) + 1
        for name in METRICS:
            value = b[name]
            if value is None:
                continue
            if value < 0:
                self.negative_residuals += 1
                value = 0.0
            hist = self.hists.get(name)
            if hist is None:
                hist = self.hists[name] = Histogram()
            hist.record(round(value * 1e6))

    def merge(self, other: BreakdownStats) -> None:
        for name, hist in other.hists.items():
            self.hists.setdefault(name, Histogram()).merge(hist)
        self.reported += other.reported
        self.not_reported += other.not_reported
        self.negative_residuals += other.negative_residuals
        for source, n in other.sources.items():
            self.sources[source] = self.sources.get(source, 0) + n

    def to_wire(self) -> dict[str, Any]:
        return {"hists": {n: h.to_wire() for n, h in self.hists.items()}, "sources": dict(self.sources),
                "counts": [self.reported, self.not_reported, self.negative_residuals]}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any] | None) -> BreakdownStats:
        out = cls()
        if not data:  # an older worker's snapshot: nothing kept there
            return out
        out.hists = {n: Histogram.from_wire(w) for n, w in data["hists"].items() if n in METRICS}
        out.sources = dict(data["sources"])
        out.reported, out.not_reported, out.negative_residuals = data["counts"]
        return out

    def section(self) -> dict[str, Any]:
        """The report's ``server_breakdown``: stages None (not reported) when no request had any."""
        stages = {name: _summary(self.hists.get(name)) for name in METRICS} if self.reported else None
        return {
            "requests_reported": self.reported,
            "requests_not_reported": self.not_reported,
            "sources": dict(sorted(self.sources.items())),
            "negative_residuals": self.negative_residuals,
            "stages": stages,
            "dominant": dominant(stages) if stages else None,
        }


def _summary(hist: Histogram | None) -> dict[str, Any] | None:
    """{count, mean, p50, p90, p99} in ms; None when the stage was never reported."""
    if hist is None or not hist.count:
        return None
    mean = hist.mean
    out: dict[str, Any] = {"count": hist.count, "mean": None if mean is None else mean / 1e6}
    values = hist.percentiles([q for _, q in QUANTILES])
    for (name, _), value in zip(QUANTILES, values, strict=True):
        out[name] = None if value is None else value / 1e6
    return out


def _largest(stages: dict[str, Any], parts: tuple[str, ...]) -> dict[str, Any] | None:
    means = {p: stages[p]["mean"] for p in parts if stages.get(p) and stages[p]["mean"] is not None}
    if not means:
        return None
    total = sum(means.values())
    stage = max(means, key=lambda p: means[p])
    return {"stage": stage.removesuffix("_ms"), "meaning": MEANING[stage], "mean_ms": means[stage],
            "share": means[stage] / total if total > 0 else None}  # fmt: skip


def dominant(stages: dict[str, Any]) -> dict[str, Any]:
    """Which stage's mean is largest within TTFT and within E2E, with its share of the stages known."""
    return {"ttft": _largest(stages, TTFT_PARTS), "e2e": _largest(stages, E2E_PARTS)}


def console_line(engine: str, section: dict[str, Any] | None) -> str | None:
    """One console line per engine whose server reported timings (None for the others)."""
    if not section or not section.get("stages"):
        return None
    stages = section["stages"]
    medians = [f"{name.removesuffix('_ms').replace('_', ' ')} {stages[name]['p50']:.1f}"
               for name in ("queue_ms", "prefill_ms", "decode_ms", "residual_ttft_ms") if stages.get(name)]  # fmt: skip
    dom = section["dominant"]
    said = [f"{k.upper()} {d['meaning']}" for k, d in (("ttft", dom["ttft"]), ("e2e", dom["e2e"])) if d]
    return f"server breakdown {engine[:16]}: p50 ms {', '.join(medians)}; dominant: {'; '.join(said)}"
