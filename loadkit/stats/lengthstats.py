"""Asked against realised lengths, per target: what the workload meant to send (target input
tokens, max_tokens) and what the server counted (usage.prompt_tokens, output tokens), with the
prompt-length drift between the two. Exact-merge histograms, so workers' shares sum exactly."""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.histogram import Histogram

FIELDS = ("input_target", "input_server", "output_asked", "output_server")
WIRE_VERSION = 1


class EngineLengths:
    def __init__(self) -> None:
        self.hists = {f: Histogram() for f in FIELDS}
        self.drift_abs = Histogram()  # |n_in - n_in_target| tokens, over requests with both
        self.exact = 0  # requests whose server count equals the target

    def add(self, r: RequestRecord) -> None:
        for name, value in zip(FIELDS, (r.n_in_target, r.n_in, r.max_tokens, r.n_out), strict=True):
            if value is not None:
                self.hists[name].record(int(value))
        if r.n_in is not None and r.n_in_target is not None:
            self.drift_abs.record(abs(r.n_in - r.n_in_target))
            self.exact += r.n_in == r.n_in_target

    def merge(self, other: EngineLengths) -> None:
        for f in FIELDS:
            self.hists[f].merge(other.hists[f])
        self.drift_abs.merge(other.drift_abs)
        self.exact += other.exact

    def to_wire(self) -> dict[str, Any]:
        return {
            "hists": {f: h.to_wire() for f, h in self.hists.items()},
            "drift": self.drift_abs.to_wire(),
            "exact": self.exact,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EngineLengths:
        out = cls()
        out.hists = {f: Histogram.from_wire(data["hists"][f]) for f in FIELDS}
        out.drift_abs = Histogram.from_wire(data["drift"])
        out.exact = int(data["exact"])
        return out

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {f: _summary(h) for f, h in self.hists.items()}
        both = self.drift_abs.count
        out["prompt_drift"] = {
            "requests": both,
            "exact": self.exact if both else None,
            "abs_tokens": _summary(self.drift_abs),
            "mean_relative": (self.drift_abs.total / self.hists["input_target"].total)
            if both and self.hists["input_target"].total
            else None,
        }
        return out


def _summary(h: Histogram) -> dict[str, Any]:
    if not h.count:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "min": None, "max": None}
    p50, p90, p99 = h.percentiles([0.5, 0.9, 0.99])
    return {
        "count": h.count,
        "mean": h.total / h.count,
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "min": h.min,
        "max": h.max,
    }


class LengthStats:
    def __init__(self) -> None:
        self.engines: dict[str, EngineLengths] = {}

    def add(self, r: RequestRecord) -> None:
        lengths = self.engines.get(r.engine)
        if lengths is None:  # not setdefault: it would build five histograms per request
            lengths = self.engines[r.engine] = EngineLengths()
        lengths.add(r)

    def merge(self, other: LengthStats) -> None:
        for name, e in other.engines.items():
            self.engines.setdefault(name, EngineLengths()).merge(e)

    def to_wire(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "engines": {n: e.to_wire() for n, e in self.engines.items()}}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> LengthStats:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"length stats payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        out.engines = {n: EngineLengths.from_wire(e) for n, e in data["engines"].items()}
        return out

    def report(self) -> dict[str, Any]:
        return {n: e.report() for n, e in sorted(self.engines.items())}
