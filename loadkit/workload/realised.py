"""What a request source actually produced: length distributions and prefix sharing, for the report."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from loadkit.workload.mooncake import BlockPrompts
from loadkit.workload.text import TextBuilder

PERCENTS = (50, 90, 99)


def nearest_rank(percent: int, n: int) -> int:
    """The 1-based rank of the nearest-rank percentile, ⌈percent/100 · n⌉ (at least 1), in integers:
    the method of every other percentile in report.json (loadkit.stats.histogram)."""
    return max(1, -(-percent * n // 100))


def length_summary(values: array[int] | list[int]) -> dict[str, Any]:
    """count, mean, std, min, nearest-rank percentiles, max and a log2 histogram; None fields when empty."""
    if len(values) == 0:
        return {
            "count": 0,
            "mean": None,
            "std": None,
            "min": None,
            "p50": None,
            "p90": None,
            "p99": None,
            "max": None,
            "histogram": {"edges": [], "counts": []},
        }
    arr = np.asarray(values, dtype=float)
    ordered = np.sort(arr)
    p50, p90, p99 = (ordered[nearest_rank(q, len(arr)) - 1] for q in PERCENTS)
    edges = [0] + [2**k for k in range(int(np.ceil(np.log2(max(arr.max(), 1)))) + 2)]
    counts, _ = np.histogram(arr, bins=edges)
    return {
        "count": len(arr),
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": int(arr.min()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(arr.max()),
        "histogram": {"edges": edges, "counts": counts.tolist()},
    }


class LengthCounts:
    """How many requests had each length: exact, and bounded by the longest length rather
    than by the number of requests (a long run at a high rate kept 16 bytes per request)."""

    __slots__ = ("counts", "n")

    def __init__(self) -> None:
        self.counts: array[int] = array("q")
        self.n = 0

    def add(self, value: int) -> None:
        counts = self.counts
        if value >= len(counts):
            counts.frombytes(bytes(8 * (value + 1 + value // 8 - len(counts))))  # amortised growth
        counts[value] += 1
        self.n += 1

    def __len__(self) -> int:
        return self.n

    def summary(self) -> dict[str, Any]:
        """What ``length_summary`` gives for the same values (nearest-rank percentiles alike)."""
        if not self.n:
            return length_summary([])
        counts = np.frombuffer(self.counts, dtype=np.int64)
        values = np.flatnonzero(counts)
        weights = counts[values]
        cum = np.cumsum(weights)
        mean = float((values * weights).sum() / self.n)
        std = float(np.sqrt((weights * (values - mean) ** 2).sum() / self.n))

        def at(rank: int) -> float:  # the rank-th smallest value, 0-based
            return float(values[np.searchsorted(cum, rank, side="right")])

        def pct(percent: int) -> float:
            return at(nearest_rank(percent, self.n) - 1)

        top = int(values[-1])
        edges = [0] + [2**k for k in range(int(np.ceil(np.log2(max(top, 1)))) + 2)]
        prefix = np.concatenate(([0], np.cumsum(counts)))
        cut = [int(prefix[min(e, len(counts))]) for e in edges]  # requests shorter than each edge
        bins = [b - a for a, b in zip(cut, cut[1:], strict=False)]
        return {"count": self.n, "mean": mean, "std": std, "min": int(values[0]),
                "p50": pct(50), "p90": pct(90), "p99": pct(99), "max": top,
                "histogram": {"edges": edges, "counts": bins}}  # fmt: skip


class Realised:
    """Accumulates per-request lengths as the source builds them (cheap: two counter bumps)."""

    def __init__(self, builder: TextBuilder) -> None:
        self.builder = builder
        self.n_in = LengthCounts()
        self.n_out = LengthCounts()
        self.labels: Counter[str] = Counter()
        self.sessions = 0
        self._blocks: BlockPrompts | None = None
        self._trace_overall: tuple[int, int] | None = None
        self._trace_seen: set[int] = set()
        self._trace_total = 0
        self._trace_repeats = 0
        self.trace_load: dict[str, Any] | None = None  # the trace reader's account (order, bad rows)
        self.warmup: dict[str, Any] | None = None  # cache warm-up requests, reported apart (warmcache.py)

    def add(self, n_in: int, n_out: int, label: str) -> None:
        self.n_in.add(max(0, n_in))
        self.n_out.add(max(0, n_out))
        self.labels[label] += 1

    def attach_sharing(self, blocks: BlockPrompts, trace_overall: tuple[int, int]) -> None:
        self._blocks, self._trace_overall = blocks, trace_overall

    def add_trace_blocks(self, hash_ids: list[int]) -> None:
        """The trace's own view of the blocks this source used, to compare like with like."""
        self._trace_total += len(hash_ids)
        self._trace_repeats += sum(1 for h in hash_ids if h in self._trace_seen)
        self._trace_seen.update(hash_ids)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokenizer": self.builder.name,
            "approximate": self.builder.approximate,
            "requests": len(self.n_in),
            "by_label": dict(self.labels),
            "input_tokens": self.n_in.summary(),
            "output_tokens_asked": self.n_out.summary(),
            "exact_misses": getattr(self.builder, "misses", None),
        }
        if self.sessions:
            out["sessions_started"] = self.sessions
        if self._blocks is not None:
            out["prefix_sharing"] = self._sharing()
        if self.trace_load is not None:
            out["trace_load"] = self.trace_load
        if self.warmup is not None:
            out["cache_warmup"] = dict(self.warmup)
        return out

    def _sharing(self) -> dict[str, Any]:
        assert self._blocks is not None and self._trace_overall is not None
        total, repeats = self._trace_overall
        return {
            "trace_ratio": repeats / total if total else None,
            "trace_ratio_items": self._trace_repeats / self._trace_total if self._trace_total else None,
            "realised_ratio": self._blocks.realised_ratio(),
            "blocks": self._blocks.blocks_total,
            "blocks_repeated": self._blocks.blocks_repeated,
            "block_tokens": self._blocks.block_tokens,
        }


def prompt_drift(pairs: Iterable[tuple[int | None, int | None]]) -> dict[str, Any]:
    """Drift of the server's prompt_tokens from the workload's target: (n_in_target, n_in) pairs.

    Pairs with either side None (not measured) are counted apart, never as 0. ``drift`` is
    n_in − n_in_target in tokens (chat templates and BOS make it positive on chat endpoints).
    """
    diffs, unmeasured = [], 0
    for target, actual in pairs:
        if target is None or actual is None:
            unmeasured += 1
        else:
            diffs.append(actual - target)
    if not diffs:
        return {
            "count": 0,
            "unmeasured": unmeasured,
            "exact_fraction": None,
            "mean": None,
            "mean_abs": None,
            "p50": None,
            "p99": None,
            "min": None,
            "max": None,
        }
    arr = np.asarray(diffs, dtype=float)
    return {
        "count": len(arr),
        "unmeasured": unmeasured,
        "exact_fraction": float(np.mean(arr == 0)),
        "mean": float(arr.mean()),
        "mean_abs": float(np.abs(arr).mean()),
        "p50": float(np.percentile(arr, 50)),
        "p99": float(np.percentile(arr, 99)),
        "min": int(arr.min()),
        "max": int(arr.max()),
    }
