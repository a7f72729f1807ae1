"""The ``kinds`` section: one row per target and request kind (chat, embeddings, rerank, a
plugin's), so a run that mixes kinds never averages an embedding's latency into a chat's.

Per row: requests, ok, failures by outcome; the latency (E2E: t_end − t_send, ok requests)
p50/p90/p99 and, for requests of two items or more, the latency per item; requests/s, items/s
and input tokens/s (the server's usage ``n_in`` of ok requests) over the target's window (first
start to last end, every kind: rates of a target's kinds add up to its own); the batch size
(items per request as sent: mean and the exact distribution). Chat's row holds its E2E too; its
TTFT/TPOT stay in the engine rows, which take no figure from a request answered in one body
(docs/metrics.md "Request kinds"). Latencies are exactly-merging histograms (stats/histogram.py)
and everything else integer sums, minima and maxima: workers merge exactly.
"""

from __future__ import annotations

from typing import Any

from loadkit.formulas import unstreamed
from loadkit.records import NS_PER_MS, RequestRecord, metrics_of
from loadkit.stats import wallclock
from loadkit.stats.histogram import Histogram
from loadkit.types import OK

WIRE_VERSION = 1
QUANTILES = (0.5, 0.9, 0.99)
NS_PER_S = 1_000_000_000


class KindRow:
    """One (target, kind): counts, latency histograms and sums."""

    def __init__(self) -> None:
        self.requests = 0
        self.ok = 0
        self.outcomes: dict[str, int] = {}
        self.latency = Histogram()  # ns, ok requests
        self.per_item = Histogram()  # ns, ok requests of >= 2 items
        self.items_ok = 0  # items of ok requests (items/s)
        self.input_tokens = 0  # usage n_in of ok requests
        self.batches: dict[int, int] = {}  # items per request as sent -> requests
        self.unstreamed = 0  # requests answered in one body (no token events)

    def add(self, r: RequestRecord) -> None:
        self.requests += 1
        self.outcomes[r.outcome] = self.outcomes.get(r.outcome, 0) + 1
        n_items = getattr(r, "n_items", None)
        if n_items is not None:
            self.batches[n_items] = self.batches.get(n_items, 0) + 1
        if unstreamed(r):
            self.unstreamed += 1
        if r.outcome != OK:
            return
        self.ok += 1
        m = metrics_of(r)
        if m.e2e_ns is not None:
            self.latency.record(m.e2e_ns)
        if m.latency_per_item_ns is not None:
            self.per_item.record(m.latency_per_item_ns)
        if n_items is not None:
            self.items_ok += n_items
        if r.n_in is not None:
            self.input_tokens += r.n_in

    def merge(self, other: KindRow) -> None:
        self.requests += other.requests
        self.ok += other.ok
        for key, n in other.outcomes.items():
            self.outcomes[key] = self.outcomes.get(key, 0) + n
        self.latency.merge(other.latency)
        self.per_item.merge(other.per_item)
        self.items_ok += other.items_ok
        self.input_tokens += other.input_tokens
        for size, n in other.batches.items():
            self.batches[size] = self.batches.get(size, 0) + n
        self.unstreamed += other.unstreamed

    def to_wire(self) -> dict[str, Any]:
        return {
            "n": [self.requests, self.ok, self.items_ok, self.input_tokens, self.unstreamed],
            "outcomes": dict(self.outcomes),
            "latency": self.latency.to_wire(),
            "per_item": self.per_item.to_wire(),
            "batches": [[k, v] for k, v in self.batches.items()],
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> KindRow:
        out = cls()
        out.requests, out.ok, out.items_ok, out.input_tokens, out.unstreamed = (int(x) for x in data["n"])
        out.outcomes = {str(k): int(v) for k, v in data["outcomes"].items()}
        out.latency = Histogram.from_wire(data["latency"])
        out.per_item = Histogram.from_wire(data["per_item"])
        out.batches = {int(k): int(v) for k, v in data["batches"]}
        return out

    def report(self, seconds: float | None) -> dict[str, Any]:
        def rate(n: int) -> float | None:
            return n / seconds if seconds else None

        return {
            "requests": self.requests,
            "ok": self.ok,
            "failures": {k: v for k, v in sorted(self.outcomes.items()) if k != OK},
            "streamed": self.unstreamed == 0,
            "latency_ms": _quantiles(self.latency),
            "latency_per_item_ms": _quantiles(self.per_item),
            "requests_per_s": rate(self.requests),
            "ok_per_s": rate(self.ok),
            "items": self.items_ok,
            "items_per_s": rate(self.items_ok) if self.batches else None,
            "input_tokens": self.input_tokens,
            "input_tokens_per_s": rate(self.input_tokens),
            "batch_size": _batches(self.batches),
        }


def _quantiles(h: Histogram) -> dict[str, float | int | None]:
    values = h.percentiles(list(QUANTILES))
    mean = h.mean
    out: dict[str, float | int | None] = {"count": h.count}
    for name, v in zip(("p50", "p90", "p99"), values, strict=True):
        out[name] = None if v is None else v / NS_PER_MS
    out["mean"] = None if mean is None else mean / NS_PER_MS
    return out


def _batches(batches: dict[int, int]) -> dict[str, Any] | None:
    """Items per request as sent: mean, nearest-rank p50/p90/p99, max and every size's count."""
    total = sum(batches.values())
    if not total:
        return None
    sizes = sorted(batches)
    out: dict[str, Any] = {"requests": total, "mean": sum(k * v for k, v in batches.items()) / total}
    for name, q in zip(("p50", "p90", "p99"), QUANTILES, strict=True):
        rank, seen = max(1, -(-int(q * 1000) * total // 1000)), 0
        for size in sizes:
            seen += batches[size]
            if seen >= rank:
                out[name] = size
                break
    out["max"] = sizes[-1]
    out["distribution"] = {str(k): batches[k] for k in sizes}
    return out


class KindStats:
    """Rows per (target, kind) and each target's window (wall clock, so nodes merge)."""

    def __init__(self, wall_offset_ns: int | None = None) -> None:
        self.rows: dict[tuple[str, str], KindRow] = {}
        self.span: dict[str, list[int]] = {}  # target -> [first start, last end], wall ns
        # The collector's offset (the engine windows' and the raw log's t_wall_offset_ns): the
        # target's window here is the engine's, to the ns.
        self.wall_offset_ns = wallclock.wall_offset_ns() if wall_offset_ns is None else wall_offset_ns

    def add(self, r: RequestRecord) -> None:
        key = (r.engine, getattr(r, "kind", "chat"))
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = KindRow()
        row.add(r)
        # The engine window's rule (stats/aggregate.py): start (else send) to end (else the
        # last event, else the start); a request never started takes no part in it.
        start = r.t_start_ns or r.t_send_ns
        if start <= 0:
            return
        events = r.event_t_ns
        end = r.t_end_ns if r.t_end_ns is not None else (events[-1] if events else start)
        start, end = start + self.wall_offset_ns, end + self.wall_offset_ns
        span = self.span.get(r.engine)
        if span is None:
            self.span[r.engine] = [start, end]
        else:
            span[0], span[1] = min(span[0], start), max(span[1], end)

    def merge(self, other: KindStats) -> None:
        for key, row in other.rows.items():
            self.rows.setdefault(key, KindRow()).merge(row)
        for engine, (a, b) in other.span.items():
            span = self.span.setdefault(engine, [a, b])
            span[0], span[1] = min(span[0], a), max(span[1], b)

    def to_wire(self) -> dict[str, Any]:
        return {
            "v": WIRE_VERSION,
            "rows": [[e, k, row.to_wire()] for (e, k), row in self.rows.items()],
            "span": {e: list(s) for e, s in self.span.items()},
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> KindStats:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"kind stats payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        out.rows = {(str(e), str(k)): KindRow.from_wire(w) for e, k, w in data["rows"]}
        out.span = {str(e): [int(a), int(b)] for e, (a, b) in data["span"].items()}
        return out

    def report(self) -> dict[str, Any]:
        """``{"rows": [...]}``, one per target and kind (target, then chat first, then by name)."""
        rows = []
        for engine, kind in sorted(self.rows, key=lambda k: (k[0], k[1] != "chat", k[1])):
            a, b = self.span.get(engine, (0, 0))
            seconds = (b - a) / NS_PER_S if b > a else None
            rows.append(
                {
                    "target": engine,
                    "kind": kind,
                    "window_s": seconds,
                    **self.rows[(engine, kind)].report(seconds),
                }
            )
        return {"rows": rows}
