"""Live chart data: TTFT / TPOT percentiles over a sliding window, sampled every few seconds.

loadkit's histograms are cumulative (and, on a master, cumulative per worker snapshot), so
the percentiles of the last ``window_s`` seconds are those of the *difference* between the
merged histogram now and the one sampled ``window_s`` ago: bucket-wise subtraction is exact,
like the merge. A point therefore describes requests that finished in that window; it is
None when none did (never 0).

Throughput and in-flight come from the report's own per-second series instead (exact, and
corrected as long streams finish), so they are not sampled here.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from loadkit.stats.histogram import Histogram, bucket_value

CHART_METRICS = ("ttft_ms", "tpot_ms")
CHART_QUANTILES = (("p50", 0.5), ("p99", 0.99))
NS_PER_MS = 1e6
DEFAULT_WINDOW_S = 10.0
MAX_POINTS = 1800  # one hour at the default 2 s sampling interval


def window_percentiles(new: Histogram, old: Histogram | None, quantiles: list[float]) -> list[float | None]:
    """Nearest-rank percentiles of the values recorded in ``new`` but not in ``old`` (ns)."""
    new_counts = new.counts
    old_counts = old.counts if old is not None else {}
    if not new_counts:
        return [None] * len(quantiles)
    indices = sorted(new_counts)
    counts = np.array([new_counts[i] - old_counts.get(i, 0) for i in indices], dtype=np.int64)
    total = int(counts.sum())
    if total <= 0:
        return [None] * len(quantiles)
    cumulative = np.cumsum(counts)
    # The epsilon keeps q·n that is an integer in exact arithmetic from rounding one rank up.
    ranks = [max(1, math.ceil(q * total - 1e-9)) for q in quantiles]
    positions = np.searchsorted(cumulative, ranks, side="left").tolist()
    return [bucket_value(indices[p]) for p in positions]


Hists = dict[str, dict[str, Histogram]]  # engine → metric → cumulative histogram


class Timeline:
    """Points per engine: unix time, windowed TTFT/TPOT p50/p99 (ms), server queue length."""

    def __init__(self, window_s: float = DEFAULT_WINDOW_S, max_points: int = MAX_POINTS) -> None:
        self.window_s = window_s
        self.max_points = max_points
        self.epoch: int | None = None
        self._snapshots: deque[tuple[float, Hists]] = deque()
        self.points: dict[str, dict[str, deque[Any]]] = {}

    def clear(self) -> None:
        self._snapshots.clear()
        self.points = {}

    def sample(
        self, t: float, epoch: int, hists: Hists, queue: dict[str, float | None] | None = None
    ) -> None:
        """Add one point per engine at unix time ``t``; a new stats ``epoch`` (reset) starts over."""
        if epoch != self.epoch:
            self.clear()
            self.epoch = epoch
        base = self._base(t)
        for engine, metrics in hists.items():
            self._add_point(engine, t, metrics, base.get(engine, {}), (queue or {}).get(engine))
        self._snapshots.append((t, {e: {m: h.copy() for m, h in ms.items()} for e, ms in hists.items()}))

    def _base(self, t: float) -> Hists:
        """The newest snapshot at least a window old (dropping older ones); else the oldest one.

        With no snapshot yet the window is "since the start": empty base.
        """
        while len(self._snapshots) >= 2 and self._snapshots[1][0] <= t - self.window_s:
            self._snapshots.popleft()
        return self._snapshots[0][1] if self._snapshots else {}

    def _add_point(self, engine: str, t: float, metrics: dict[str, Histogram],
                   base: dict[str, Histogram], queue: float | None) -> None:  # fmt: skip
        series = self.points.get(engine)
        if series is None:
            keys = ["t", "queue"] + [f"{m}_{p}" for m in CHART_METRICS for p, _ in CHART_QUANTILES]
            series = self.points[engine] = {k: deque(maxlen=self.max_points) for k in keys}
        series["t"].append(t)
        series["queue"].append(queue)
        qs = [q for _, q in CHART_QUANTILES]
        for metric in CHART_METRICS:
            values = (
                window_percentiles(metrics[metric], base.get(metric), qs)
                if metric in metrics
                else [None] * len(qs)
            )
            for (name, _), value in zip(CHART_QUANTILES, values, strict=True):
                series[f"{metric}_{name}"].append(None if value is None else round(value / NS_PER_MS, 3))

    def to_json(self) -> dict[str, dict[str, list[Any]]]:
        return {engine: {k: list(v) for k, v in series.items()} for engine, series in self.points.items()}


def seconds_series(report: dict[str, Any], now: float | None = None,
                   last_s: int = MAX_POINTS) -> dict[str, dict[str, list[Any]]]:  # fmt: skip
    """Per engine, the report's per-second output tokens and mean in-flight (last ``last_s`` s).

    With ``now`` (a live run) the current second is left out: it is still filling up and would
    show as a dip on every refresh.
    """
    out = {}
    for engine, section in report["engines"].items():
        cols = section.get("timeseries") or {}
        unix = list(cols.get("unix", []))
        end = len(unix) if now is None else sum(1 for u in unix if u < int(now))
        start = max(0, end - last_s)
        out[engine] = {k: list(cols.get(k, []))[start:end] for k in ("unix", "output_tokens", "in_flight")}
    return out
