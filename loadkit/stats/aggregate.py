"""GroupStats: everything kept about the requests of one (engine, label), mergeable exactly.

The hot path (``GroupStats.add``) computes the metrics of DESIGN.md §1 straight from the
record's integer nanosecond timestamps: the same formulas as ``loadkit.records`` (a test
holds the two to each other) without a float round trip, which would cost both time and a
nanosecond of truth per value. Latency histograms take `ok` requests only; every outcome is
counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loadkit.histogram import NUMPY_THRESHOLD, Histogram
from loadkit.records import RequestRecord
from loadkit.types import CANCELLED, OK

NS_PER_S = 1_000_000_000
# One day of per-second rows per group; later seconds are counted as dropped, not stored.
MAX_TIMESERIES_SECONDS = 86_400

TIME_METRICS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "itl_ms", "itl_chunk_ms", "e2e_ms")
TOKEN_METRICS = ("n_in", "n_out", "n_cached")
METRICS = TIME_METRICS + TOKEN_METRICS

# SLO keys a user may give, and the per-request value each is judged on (ns).
SLO_KEYS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "itl_ms")


@dataclass(frozen=True, slots=True)
class Slo:
    """One service-level objective: the request's ``key`` metric must be ≤ ``limit_ms``."""

    key: str
    limit_ms: float

    @property
    def limit_ns(self) -> int:
        return round(self.limit_ms * 1_000_000)


class GroupStats:
    """Histograms, counters and per-second series of one (engine, label)."""

    __slots__ = (
        "hists", "outcomes", "sent", "output_tokens", "output_tokens_all", "input_tokens",
        "cached_tokens", "n_out_sources", "slo_counts", "good", "judged", "first_send_wall_ns",
        "last_end_wall_ns", "series", "series_dropped",
    )  # fmt: skip

    def __init__(self) -> None:
        self.hists: dict[str, Histogram] = {name: Histogram() for name in METRICS}
        self.outcomes: dict[str, int] = {}
        self.sent = 0
        self.output_tokens = 0  # of ok requests: the throughput numerator (vLLM convention)
        self.output_tokens_all = 0  # of every request that reported n_out
        self.input_tokens = 0
        self.cached_tokens = 0
        self.n_out_sources: dict[str, int] = {}
        # Per SLO key: [met, violated, not_measured] over judged requests.
        self.slo_counts: dict[str, list[int]] = {}
        self.good = 0  # ok requests meeting every SLO
        self.judged = 0  # requests that count for attainment: every outcome but `cancelled`
        self.first_send_wall_ns: int | None = None
        self.last_end_wall_ns: int | None = None
        # wall-clock second → [completed, ok, output tokens, in-flight ns]
        self.series: dict[int, list[int]] = {}
        self.series_dropped = 0

    # -- hot path -------------------------------------------------------------------------

    def add(self, r: RequestRecord, wall_offset_ns: int, slos: tuple[Slo, ...]) -> None:
        """Count one finished request. ``wall_offset_ns`` turns monotonic ns into Unix ns."""
        self.sent += 1
        outcome = r.outcome
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        n_out = r.n_out
        if n_out is not None:
            self.output_tokens_all += n_out
        self._add_tokens(r)
        end = r.t_end_ns if r.t_end_ns is not None else (r.event_t_ns[-1] if r.event_t_ns else r.t_send_ns)
        ok = outcome == OK
        if ok:
            values = self._add_latencies(r, end)
            if n_out is not None:
                self.output_tokens += n_out
            self._judge(values, slos)
        elif outcome != CANCELLED:
            self.judged += 1
        if r.t_send_ns > 0:
            self._add_series(r.t_send_ns + wall_offset_ns, end + wall_offset_ns, ok, (n_out or 0) if ok else 0)

    def _add_tokens(self, r: RequestRecord) -> None:
        hists = self.hists
        if r.n_in is not None:
            self.input_tokens += r.n_in
            hists["n_in"].record(r.n_in)
        if r.cached_tokens is not None:
            self.cached_tokens += r.cached_tokens
            hists["n_cached"].record(r.cached_tokens)
        if r.n_out_source is not None:
            self.n_out_sources[r.n_out_source] = self.n_out_sources.get(r.n_out_source, 0) + 1

    def _add_latencies(self, r: RequestRecord, end: int) -> dict[str, int | None]:
        """Record an ok request's latencies; return the per-request values SLOs are judged on."""
        hists, events, send = self.hists, r.event_t_ns, r.t_send_ns
        values: dict[str, int | None] = {"e2e_ms": None, "ttft_ms": None, "ttft_sched_ms": None,
                                         "tpot_ms": None, "itl_ms": None}  # fmt: skip
        if r.t_end_ns is not None:
            values["e2e_ms"] = e2e = r.t_end_ns - send
            hists["e2e_ms"].record(e2e)
        if r.n_out is not None:
            hists["n_out"].record(r.n_out)
        if not events:
            return values
        first = events[0]
        values["ttft_ms"] = ttft = first - send
        hists["ttft_ms"].record(ttft)
        sched = r.t_sched_ns if r.t_sched_ns is not None else send
        values["ttft_sched_ms"] = first - sched
        hists["ttft_sched_ms"].record(first - sched)
        n_out = r.n_out
        if n_out is not None and n_out >= 2:
            values["tpot_ms"] = tpot = _div_round(events[-1] - first, n_out - 1)
            hists["tpot_ms"].record(tpot)
        if len(events) > 1:
            values["itl_ms"] = self._add_itl(events, r.event_tokens)
        return values

    def _add_itl(self, events: list[int], tokens: list[int]) -> int:
        """ITL per chunk and per token (weighted by k_i); returns the largest chunk gap."""
        if len(events) > NUMPY_THRESHOLD:
            return self._add_itl_numpy(events, tokens)
        chunk, per_token = self.hists["itl_chunk_ms"], self.hists["itl_ms"]
        worst = 0
        prev = events[0]
        for t, k in zip(events[1:], tokens[1:], strict=False):
            gap = t - prev
            prev = t
            chunk.record(gap)
            if k > 1:
                per_token.record(_div_round(gap, k), k)
            else:
                per_token.record(gap)
            if gap > worst:
                worst = gap
        return worst

    def _add_itl_numpy(self, events: list[int], tokens: list[int]) -> int:
        gaps = np.diff(np.asarray(events, dtype=np.int64))
        k = np.maximum(np.asarray(tokens[1 : len(events)], dtype=np.int64), 1)
        self.hists["itl_chunk_ms"].record_many(gaps)
        if int(k.max()) == 1:
            self.hists["itl_ms"].record_many(gaps)
        else:
            # Round half up, as _div_round does for the Python path.
            self.hists["itl_ms"].record_many((2 * gaps + k) // (2 * k), k)
        return int(gaps.max())

    def _judge(self, values: dict[str, int | None], slos: tuple[Slo, ...]) -> None:
        self.judged += 1
        good = True
        for slo in slos:
            counts = self.slo_counts.get(slo.key)
            if counts is None:
                counts = self.slo_counts[slo.key] = [0, 0, 0]
            value = values.get(slo.key)
            if value is None:
                counts[2] += 1  # not measured (e.g. TPOT of a 1-token answer): cannot violate
            elif value <= slo.limit_ns:
                counts[0] += 1
            else:
                counts[1] += 1
                good = False
        if good:
            self.good += 1

    def _add_series(self, start: int, end: int, ok: bool, tokens: int) -> None:
        if self.first_send_wall_ns is None or start < self.first_send_wall_ns:
            self.first_send_wall_ns = start
        if self.last_end_wall_ns is None or end > self.last_end_wall_ns:
            self.last_end_wall_ns = end
        row = self._row(end // NS_PER_S)
        if row is not None:
            row[0] += 1
            row[1] += ok
            row[2] += tokens
        self._add_in_flight(start, max(start, end))

    def _add_in_flight(self, start: int, end: int) -> None:
        """Spread the request's lifetime over the seconds it spans (mean concurrency per second)."""
        second = start // NS_PER_S
        while True:
            row_end = (second + 1) * NS_PER_S
            row = self._row(second)
            if row is not None:
                row[3] += min(end, row_end) - start
            if end <= row_end:
                return
            start, second = row_end, second + 1

    def _row(self, second: int) -> list[int] | None:
        row = self.series.get(second)
        if row is None:
            if len(self.series) >= MAX_TIMESERIES_SECONDS:
                self.series_dropped += 1
                return None
            row = self.series[second] = [0, 0, 0, 0]
        return row

    # -- merge and wire -------------------------------------------------------------------

    def merge(self, other: GroupStats) -> None:
        """Add ``other`` into this group (exact)."""
        for name, hist in other.hists.items():
            self.hists[name].merge(hist)
        _add_counts(self.outcomes, other.outcomes)
        _add_counts(self.n_out_sources, other.n_out_sources)
        for key, counts in other.slo_counts.items():
            mine = self.slo_counts.setdefault(key, [0, 0, 0])
            for i, n in enumerate(counts):
                mine[i] += n
        for name in ("sent", "output_tokens", "output_tokens_all", "input_tokens", "cached_tokens",
                     "good", "judged", "series_dropped"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.first_send_wall_ns = _min_opt(self.first_send_wall_ns, other.first_send_wall_ns)
        self.last_end_wall_ns = _max_opt(self.last_end_wall_ns, other.last_end_wall_ns)
        for second, row in other.series.items():
            mine_row = self._row(second)
            if mine_row is not None:
                for i, n in enumerate(row):
                    mine_row[i] += n

    def to_wire(self) -> dict[str, Any]:
        return {
            "hists": {name: h.to_wire() for name, h in self.hists.items() if h.count or h.clamped},
            "outcomes": dict(self.outcomes),
            "n_out_sources": dict(self.n_out_sources),
            "slo_counts": {k: list(v) for k, v in self.slo_counts.items()},
            "counters": [self.sent, self.output_tokens, self.output_tokens_all, self.input_tokens,
                         self.cached_tokens, self.good, self.judged, self.series_dropped],  # fmt: skip
            "window": [self.first_send_wall_ns, self.last_end_wall_ns],
            "series": [[second, *row] for second, row in sorted(self.series.items())],
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> GroupStats:
        group = cls()
        for name, wire in data["hists"].items():
            if name in group.hists:
                group.hists[name] = Histogram.from_wire(wire)
        group.outcomes = dict(data["outcomes"])
        group.n_out_sources = dict(data["n_out_sources"])
        group.slo_counts = {k: list(v) for k, v in data["slo_counts"].items()}
        (group.sent, group.output_tokens, group.output_tokens_all, group.input_tokens,
         group.cached_tokens, group.good, group.judged, group.series_dropped) = data["counters"]  # fmt: skip
        group.first_send_wall_ns, group.last_end_wall_ns = data["window"]
        group.series = {row[0]: list(row[1:]) for row in data["series"]}
        return group


def _div_round(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded half up, in integers (no float error at any size)."""
    return (2 * numerator + denominator) // (2 * denominator)


def _add_counts(into: dict[str, int], other: dict[str, int]) -> None:
    for key, n in other.items():
        into[key] = into.get(key, 0) + n


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
