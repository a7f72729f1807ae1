"""What a request source actually produced: length distributions and prefix sharing, for the report."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from loadkit.workload.mooncake import BlockPrompts
from loadkit.workload.text import TextBuilder


def length_summary(values: array | list[int]) -> dict[str, Any]:
    """count, mean, std, min, percentiles, max and a log2 histogram; None fields when empty."""
    if len(values) == 0:
        return {"count": 0, "mean": None, "std": None, "min": None, "p50": None, "p90": None,
                "p99": None, "max": None, "histogram": {"edges": [], "counts": []}}
    arr = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    edges = [0] + [2**k for k in range(int(np.ceil(np.log2(max(arr.max(), 1)))) + 2)]
    counts, _ = np.histogram(arr, bins=edges)
    return {"count": len(arr), "mean": float(arr.mean()), "std": float(arr.std()), "min": int(arr.min()),
            "p50": float(p50), "p90": float(p90), "p99": float(p99), "max": int(arr.max()),
            "histogram": {"edges": edges, "counts": counts.tolist()}}


class Realised:
    """Accumulates per-request lengths as the source builds them (cheap: two int appends)."""

    def __init__(self, builder: TextBuilder) -> None:
        self.builder = builder
        self.n_in: array = array("q")
        self.n_out: array = array("q")
        self.labels: Counter[str] = Counter()
        self.sessions = 0
        self._blocks: BlockPrompts | None = None
        self._trace_overall: tuple[int, int] | None = None
        self._trace_seen: set[int] = set()
        self._trace_total = 0
        self._trace_repeats = 0

    def add(self, n_in: int, n_out: int, label: str) -> None:
        self.n_in.append(n_in)
        self.n_out.append(n_out)
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
            "input_tokens": length_summary(self.n_in),
            "output_tokens_asked": length_summary(self.n_out),
            "exact_misses": getattr(self.builder, "misses", None),
        }
        if self.sessions:
            out["sessions_started"] = self.sessions
        if self._blocks is not None:
            out["prefix_sharing"] = self._sharing()
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
        return {"count": 0, "unmeasured": unmeasured, "exact_fraction": None, "mean": None, "mean_abs": None,
                "p50": None, "p99": None, "min": None, "max": None}
    arr = np.asarray(diffs, dtype=float)
    return {"count": len(arr), "unmeasured": unmeasured, "exact_fraction": float(np.mean(arr == 0)),
            "mean": float(arr.mean()), "mean_abs": float(np.abs(arr).mean()),
            "p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99)),
            "min": int(arr.min()), "max": int(arr.max())}
