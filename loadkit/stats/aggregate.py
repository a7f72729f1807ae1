"""GroupStats: everything kept about the requests of one (engine, label), mergeable exactly.

The hot path (``GroupStats.add``) records the request's metrics as computed once for it
(``loadkit.formulas.RequestMetrics``, integer ns), whose values divided by 10^6 are
``loadkit.records``' milliseconds (a test holds the two exactly equal). Values are appended to small
pending lists and recorded into the histograms a few thousand at a time with numpy
(``flush``), which costs a fraction of per-value Python work; every reader flushes first, so
nothing observable depends on the batching. Latency histograms take `ok` requests only;
every outcome is counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loadkit.formulas import RequestMetrics, itl_token_weighted, unstreamed
from loadkit.records import RequestRecord, metrics_of
from loadkit.stats.breakdown import BreakdownStats
from loadkit.stats.histogram import Histogram
from loadkit.stats.messages import MessageCounts, failure_message
from loadkit.stats.metrics import CHANNEL_TIME_METRICS, METRICS, Slo, compile_slos, judge
from loadkit.stats.series import Series
from loadkit.stats.turns import cooperative, give_way
from loadkit.types import CANCELLED, OK

# Pending values per list before a numpy flush: bounds memory, amortises numpy's call cost.
FLUSH_RECORDS = 2048
FLUSH_ITL = 16384

# Unweighted pending lists, one per histogram fed one value per request (or per event).
_PLAIN = (
    "ttft_ms",
    "ttft_sched_ms",
    "tpot_ms",
    "e2e_ms",
    "n_in",
    "n_out",
    "n_cached",
    "itl_chunk_ms",
    "itl_ms",
    "ttft_with_connect_ms",
    "connect_ms",
    "tls_ms",
    *CHANNEL_TIME_METRICS,
    "n_reasoning",
    "n_answer",
    "n_tool",
)


class GroupStats:
    """Histograms, counters and per-second series of one (engine, label)."""

    __slots__ = (
        "hists", "outcomes", "sent", "output_tokens", "output_tokens_all", "input_tokens",
        "cached_tokens", "n_out_sources", "slo_counts", "good", "judged", "first_send_wall_ns",
        "last_end_wall_ns", "series", "wall_offset_ns", "pending", "pending_w", "pending_series",
        "_slos", "messages", "ends", "breakdown",
    )  # fmt: skip

    def __init__(self, wall_offset_ns: int = 0, slos: tuple[Slo, ...] = ()) -> None:
        self.hists: dict[str, Histogram] = {name: Histogram() for name in METRICS}
        self.outcomes: dict[str, int] = {}
        self.sent = 0
        self.output_tokens = 0  # of ok requests: the throughput numerator (vLLM's convention)
        self.output_tokens_all = 0  # of every request that reported n_out
        self.input_tokens = 0
        self.cached_tokens = 0
        self.n_out_sources: dict[str, int] = {}
        self.slo_counts: dict[str, list[int]] = {}  # key → [met, violated, not_measured]
        self.good = 0  # ok requests meeting every SLO
        self.judged = 0  # requests that count for attainment: every outcome but `cancelled`
        self.first_send_wall_ns: int | None = None
        self.last_end_wall_ns: int | None = None
        self.series = Series()
        self.wall_offset_ns = wall_offset_ns  # monotonic ns + offset = Unix ns
        self.pending: dict[str, list[int]] = {name: [] for name in _PLAIN}
        self.pending_w: tuple[list[int], list[int]] = ([], [])  # per-token ITL of k>1 events
        self.pending_series: tuple[list[int], list[int], list[int]] = ([], [], [])  # start, end, ok tokens/-1
        self._slos = compile_slos(slos)
        self.messages = MessageCounts()  # what the server said, per failed outcome
        self.ends: dict[str, int] = {}  # ok requests by how the stream ended (marker / close)
        self.breakdown = BreakdownStats()  # the engine's own timings, joined (issue 26)

    # -- hot path -------------------------------------------------------------------------

    def add(self, r: RequestRecord) -> None:
        """Count one finished request (its metrics as ``RequestRecord.measure`` kept them)."""
        m = metrics_of(r)
        self.sent += 1
        outcome = r.outcome
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        pending = self.pending
        if r.n_in is not None:
            self.input_tokens += r.n_in
            pending["n_in"].append(r.n_in)
        if r.cached_tokens is not None:
            self.cached_tokens += r.cached_tokens
            pending["n_cached"].append(r.cached_tokens)
        if r.n_out_source is not None:
            self.n_out_sources[r.n_out_source] = self.n_out_sources.get(r.n_out_source, 0) + 1
        n_out = r.n_out
        if n_out is not None:
            self.output_tokens_all += n_out
        if m.connect_ns is not None:
            # Connection set-up is the connection's, whatever became of the request on it.
            pending["connect_ms"].append(m.connect_ns)
            if m.tls_ns is not None:
                pending["tls_ms"].append(m.tls_ns)
        events = r.event_t_ns
        start = r.t_start_ns or r.t_send_ns
        end = r.t_end_ns if r.t_end_ns is not None else (events[-1] if events else start)
        tokens = -1  # series marker for "not ok"
        if outcome == OK:
            tokens = n_out or 0
            self.output_tokens += tokens
            self._add_latencies(r, m)
            self._judge(m.slo_values)
            if r.end is not None:
                self.ends[r.end] = self.ends.get(r.end, 0) + 1
            self.breakdown.add(r)
        elif outcome != CANCELLED:
            self.judged += 1
            self.messages.add(outcome, failure_message(r), at_ns=end + self.wall_offset_ns)
        if start > 0:
            # In flight (and in the window) from the start, connection set-up included.
            starts, ends, toks = self.pending_series
            starts.append(start)
            ends.append(end)
            toks.append(tokens)
        # n_in too: a run of body kinds (embeddings) queues no E2E here (their kind's rows do).
        if (len(pending["e2e_ms"]) >= FLUSH_RECORDS or len(pending["n_in"]) >= FLUSH_RECORDS
                or len(pending["itl_chunk_ms"]) >= FLUSH_ITL):  # fmt: skip
            with cooperative():  # a batch of 16k ITL values takes ms; other streams read on
                self.flush()

    def _add_latencies(self, r: RequestRecord, m: RequestMetrics) -> None:
        """Queue an ok request's latencies and token counts."""
        pending = self.pending
        if m.itl_gaps_ns:
            self._add_itl(m.itl_gaps_ns, r.event_tokens)
        if m.e2e_ns is not None and not unstreamed(r):  # a body kind's latency: its kind's rows
            pending["e2e_ms"].append(m.e2e_ns)
        if r.n_out is not None:
            pending["n_out"].append(r.n_out)
        if m.ttft_ns is not None:
            pending["ttft_ms"].append(m.ttft_ns)
            pending["ttft_sched_ms"].append(m.ttft_sched_ns)  # type: ignore[arg-type]
            pending["ttft_with_connect_ms"].append(m.ttft_with_connect_ns)  # type: ignore[arg-type]
        if m.tpot_ns is not None:
            pending["tpot_ms"].append(m.tpot_ns)
        for name, value in (("n_reasoning", r.n_reasoning), ("n_answer", r.n_answer), ("n_tool", r.n_tool),
                            ("ttfat_ms", m.ttfat_ns), ("answer_tpot_ms", m.answer_tpot_ns),
                            ("ttfrt_ms", m.ttfrt_ns), ("reasoning_ms", m.reasoning_ns),
                            ("ttftc_ms", m.ttftc_ns)):  # fmt: skip
            if value is not None:
                pending[name].append(value)

    def _add_itl(self, gaps: list[int], tokens: list[int]) -> None:
        """Queue ITL per chunk and per token (weighted by k_i; formulas.itl_token_weighted),
        the per-token values as the gaps themselves when every event carries one token."""
        self.pending["itl_chunk_ms"].extend(gaps)
        weighted = itl_token_weighted(gaps, tokens)
        if weighted is None:
            self.pending["itl_ms"].extend(gaps)
        else:
            values, weights = self.pending_w
            values.extend(weighted[0])
            weights.extend(weighted[1])

    def _judge(self, values: tuple[int | None, ...]) -> None:
        self.judged += 1
        if judge(values, self._slos, self.slo_counts):
            self.good += 1

    # -- batching -------------------------------------------------------------------------

    def flush(self) -> None:
        """Move every pending value into the histograms and the series (numpy, in bulk)."""
        # Each list is recorded and cleared between turns (turns.py), so a flush that another
        # greenlet interleaves with this one finds every value exactly once.
        for name, values in self.pending.items():
            if values:
                self.hists[name].record_many(np.asarray(values, dtype=np.int64))
                values.clear()
                give_way()
        values, weights = self.pending_w
        if values:
            self.hists["itl_ms"].record_many(
                np.asarray(values, dtype=np.int64), np.asarray(weights, dtype=np.int64)
            )
            values.clear()
            weights.clear()
            give_way()
        self._flush_series()

    def _flush_series(self) -> None:
        starts_l, ends_l, toks_l = self.pending_series
        if not starts_l:
            return
        starts = np.asarray(starts_l, dtype=np.int64) + self.wall_offset_ns
        ends = np.asarray(ends_l, dtype=np.int64) + self.wall_offset_ns
        toks = np.asarray(toks_l, dtype=np.int64)
        ok = toks >= 0
        self.series.add_batch(starts, ends, ok.astype(np.int64), np.where(ok, toks, 0))
        self.first_send_wall_ns = _min_opt(self.first_send_wall_ns, int(starts.min()))
        self.last_end_wall_ns = _max_opt(self.last_end_wall_ns, int(np.maximum(ends, starts).max()))
        for column in self.pending_series:
            column.clear()

    # -- merge and wire -------------------------------------------------------------------

    def merge(self, other: GroupStats) -> None:
        """Add ``other`` into this group (exact)."""
        self.flush()
        other.flush()
        for name, hist in other.hists.items():
            self.hists[name].merge(hist)
        _add_counts(self.outcomes, other.outcomes)
        _add_counts(self.n_out_sources, other.n_out_sources)
        _add_counts(self.ends, other.ends)
        self.messages.merge(other.messages)
        self.breakdown.merge(other.breakdown)
        for key, counts in other.slo_counts.items():
            mine = self.slo_counts.setdefault(key, [0, 0, 0])
            for i, n in enumerate(counts):
                mine[i] += n
        for name in ("sent", "output_tokens", "output_tokens_all", "input_tokens", "cached_tokens",
                     "good", "judged"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.first_send_wall_ns = _min_opt(self.first_send_wall_ns, other.first_send_wall_ns)
        self.last_end_wall_ns = _max_opt(self.last_end_wall_ns, other.last_end_wall_ns)
        self.series.merge(other.series)

    def to_wire(self, series_delta: bool = False) -> dict[str, Any]:
        """Everything, JSON/msgpack-able; ``series_delta``: only the changed time-series rows."""
        self.flush()
        return {
            "hists": {name: h.to_wire() for name, h in self.hists.items() if h.count or h.clamped},
            "outcomes": dict(self.outcomes),
            "n_out_sources": dict(self.n_out_sources),
            "slo_counts": {k: list(v) for k, v in self.slo_counts.items()},
            "counters": [
                self.sent,
                self.output_tokens,
                self.output_tokens_all,
                self.input_tokens,
                self.cached_tokens,
                self.good,
                self.judged,
                self.series.dropped,
            ],  # fmt: skip
            "window": [self.first_send_wall_ns, self.last_end_wall_ns],
            "series": self.series.delta_to_wire() if series_delta else self.series.to_wire(),
            "messages": self.messages.to_wire(),
            "ends": dict(self.ends),
            "breakdown": self.breakdown.to_wire(),
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
         group.cached_tokens, group.good, group.judged, dropped) = data["counters"]  # fmt: skip
        group.first_send_wall_ns, group.last_end_wall_ns = data["window"]
        group.series = Series.from_wire(data["series"], dropped)
        # Absent from an older worker's snapshot: nothing was kept there.
        group.messages = MessageCounts.from_wire(data.get("messages"))
        group.ends = dict(data.get("ends") or {})
        group.breakdown = BreakdownStats.from_wire(data.get("breakdown"))
        return group


def _add_counts(into: dict[str, int], other: dict[str, int]) -> None:
    for key, n in other.items():
        into[key] = into.get(key, 0) + n


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
