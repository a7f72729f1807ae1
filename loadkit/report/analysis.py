"""Numbers the HTML report plots, computed from the raw log (numpy) or the report's summaries.

Percentiles of raw-log values go through the stats histogram (nearest rank), as report.json's."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadkit.report.rawdata import RawData
from loadkit.stats.histogram import Histogram

CDF_POINTS = 300
SUMMARY_POINTS = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999),
                  ("max", 1.0))  # fmt: skip
MAX_TIME_BINS = 300


def cdf_from_values(values: np.ndarray) -> tuple[list[float], list[float]]:
    """Empirical CDF points: ~300 evenly spread ranks plus every rank of the top 1% tail."""
    v = np.sort(values)
    n = v.size
    if n == 0:
        return [], []
    even = np.linspace(0, n - 1, min(n, CDF_POINTS))
    tail = np.arange(max(0, n - min(n // 100, CDF_POINTS)), n)
    idx = np.unique(np.concatenate([even.astype(np.int64), tail]))
    return v[idx].tolist(), ((idx + 1) / n).tolist()


def cdf_from_summary(summary: dict[str, Any] | None) -> tuple[list[float], list[float]]:
    """CDF points from a report summary (min, p50 … p999, max): a coarse but honest outline."""
    if not summary or not summary.get("count"):
        return [], []
    xs, ys = [], []
    for key, q in SUMMARY_POINTS:
        value = summary.get(key)
        if value is not None:
            xs.append(float(value))
            ys.append(q)
    return xs, ys


def _nearest_rank_ms(values_ms: np.ndarray, qs: list[float]) -> list[float]:
    """The report's one method on raw-log values: back to the ns they were (the raw log's ms are
    loadkit.formulas' ns / 10^6), into the stats histogram, nearest rank."""
    hist = Histogram()
    hist.record_many(np.rint(values_ms * 1e6).astype(np.int64))
    return [v / 1e6 for v in hist.percentiles(qs) if v is not None]


def ttft_over_time(raw: RawData, engine: str) -> dict[str, list[float]]:
    """TTFT p50/p99 per time bin of first-token arrival, seconds since each raw-log file's first send.

    Times are monotonic-clock readings of the node that wrote the file, so each file is
    shifted to its own start: distributed workers' clocks are not comparable with each other.
    """
    col = raw.columns
    keep = raw.mask(engine) & np.isfinite(col["t_first_ns"]) & np.isfinite(col["ttft_ms"])
    if not keep.any():
        return {"t": [], "p50": [], "p99": []}
    files = col["file"]
    starts = np.full(int(files.max()) + 1 if files.size else 1, np.nan)
    for f in np.unique(files[keep]):
        starts[f] = np.nanmin(col["t_send_ns"][files == f])
    secs = (col["t_first_ns"][keep] - starts[files[keep]]) / 1e9
    width = max(1.0, float(np.ceil((secs.max() + 1e-9) / MAX_TIME_BINS)))
    bins = np.floor(secs / width).astype(np.int64)
    order = np.argsort(bins, kind="stable")
    bins, ttft = bins[order], col["ttft_ms"][keep][order]
    edges = np.flatnonzero(np.diff(bins)) + 1
    out: dict[str, list[float]] = {"t": [], "p50": [], "p99": []}
    for b, v in zip(bins[np.r_[0, edges]], np.split(ttft, edges), strict=True):
        p50, p99 = _nearest_rank_ms(v, [0.5, 0.99])
        out["t"].append(float(b * width))
        out["p50"].append(float(p50))
        out["p99"].append(float(p99))
    return out
