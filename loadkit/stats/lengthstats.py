"""Asked against realised lengths, per target: what the workload meant to send (target input
tokens, max_tokens) and what the server counted (usage.prompt_tokens, output tokens), with the
prompt-length drift between the two; and the latencies per input-length bucket (report.html's
length-bucket table reads them). Exact-merge histograms, so workers' shares sum exactly."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.histogram import Histogram
from loadkit.stats.reasoningsplit import ReasoningSplit
from loadkit.stats.stagestats import StageCell

FIELDS = ("input_target", "input_server", "output_asked", "output_server")
WIRE_VERSION = 3  # 2: latencies per input-length bucket; 3: the expected reasoning split
# (lowest input tokens, label) of the buckets, by the server's prompt count; the last is open-ended.
INPUT_BUCKETS = ((0, "<256"), (256, "256–1k"), (1024, "1k–4k"), (4096, "4k–16k"), (16384, "≥16k"))
_BOUNDS = [low for low, _ in INPUT_BUCKETS[1:]]


def input_bucket(n_in: int) -> str:
    """The label of the bucket ``n_in`` input tokens fall in."""
    return INPUT_BUCKETS[bisect_right(_BOUNDS, n_in)][1]


class EngineLengths:
    def __init__(self) -> None:
        self.hists = {f: Histogram() for f in FIELDS}
        self.drift_abs = Histogram()  # |n_in - n_in_target| tokens, over requests with both
        self.exact = 0  # requests whose server count equals the target
        # TTFT, TPOT, E2E per input-length bucket (requests whose server counted the prompt),
        # in the engine sections' ns, so the buckets' percentiles are the same method.
        self.by_input: dict[str, StageCell] = {}
        self.split = ReasoningSplit()  # expected vs realised reasoning share (reason_ratio)

    def add(self, r: RequestRecord) -> None:
        for name, value in zip(FIELDS, (r.n_in_target, r.n_in, r.max_tokens, r.n_out), strict=True):
            if value is not None:
                self.hists[name].record(int(value))
        if r.n_in is not None and r.n_in_target is not None:
            self.drift_abs.record(abs(r.n_in - r.n_in_target))
            self.exact += r.n_in == r.n_in_target
        if r.n_in is not None:
            label = input_bucket(r.n_in)
            cell = self.by_input.get(label)
            if cell is None:
                cell = self.by_input[label] = StageCell()
            cell.add(r, None)
        if r.expected_reasoning_tokens is not None:
            self.split.add(r)

    def merge(self, other: EngineLengths) -> None:
        for f in FIELDS:
            self.hists[f].merge(other.hists[f])
        self.drift_abs.merge(other.drift_abs)
        self.exact += other.exact
        for label, cell in other.by_input.items():
            self.by_input.setdefault(label, StageCell()).merge(cell)
        self.split.merge(other.split)

    def to_wire(self) -> dict[str, Any]:
        return {
            "hists": {f: h.to_wire() for f, h in self.hists.items()},
            "drift": self.drift_abs.to_wire(),
            "exact": self.exact,
            "by_input": {label: cell.to_wire() for label, cell in self.by_input.items()},
            "split": self.split.to_wire(),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EngineLengths:
        out = cls()
        out.hists = {f: Histogram.from_wire(data["hists"][f]) for f in FIELDS}
        out.drift_abs = Histogram.from_wire(data["drift"])
        out.exact = int(data["exact"])
        out.by_input = {str(k): StageCell.from_wire(v) for k, v in data["by_input"].items()}
        out.split = ReasoningSplit.from_wire(data["split"])
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
        out["by_input_tokens"] = self._buckets()
        split = self.split.report()
        if split is not None:  # a workload with an expected split (ServeGen reason_ratio) only
            out["reasoning"] = split
        return out

    def _buckets(self) -> list[dict[str, Any]]:
        """Per input-length bucket with requests, in length order: requests, ok, TTFT / TPOT /
        E2E p50, p90, p99 (ms) of the ok ones, and TTFAT when measured."""
        rows: list[dict[str, Any]] = []
        for i, (low, label) in enumerate(INPUT_BUCKETS):
            cell = self.by_input.get(label)
            if cell is None:
                continue
            high = INPUT_BUCKETS[i + 1][0] if i + 1 < len(INPUT_BUCKETS) else None
            s = cell.summary(None)
            rows.append({"bucket": label, "min_tokens": low, "below_tokens": high, "requests": s["requests"],
                         "ok": s["ok"], **{m: s[m] for m in ("ttft_ms", "tpot_ms", "e2e_ms", "ttfat_ms") if m in s}})  # fmt: skip
        return rows


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
