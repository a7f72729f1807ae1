"""Numbers the HTML report plots, computed from the raw log (numpy) or the report's summaries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loadkit.report.rawdata import RawData

CDF_POINTS = 300
# (lower bound inclusive, label); the last bucket is open-ended.
LENGTH_BUCKETS = ((0, "<256"), (256, "256–1k"), (1024, "1k–4k"), (4096, "4k–16k"), (16384, "≥16k"))
SUMMARY_POINTS = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999),
                  ("max", 1.0))  # fmt: skip
MAX_TIME_BINS = 300


def quantile(values: np.ndarray, q: float) -> float | None:
    """Linear-interpolated quantile, None for no values (not measured, not 0)."""
    return None if values.size == 0 else float(np.quantile(values, q))


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


@dataclass
class BucketRow:
    bucket: str
    count: int
    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    tpot_p99: float | None
    e2e_p50: float | None


def length_buckets(raw: RawData, engine: str) -> list[BucketRow]:
    """Percentiles per input-length bucket (ok requests with a known n_in)."""
    keep = raw.mask(engine) & np.isfinite(raw.columns["n_in"])
    n_in = raw.columns["n_in"][keep]
    rows = []
    for i, (lo, label) in enumerate(LENGTH_BUCKETS):
        hi = LENGTH_BUCKETS[i + 1][0] if i + 1 < len(LENGTH_BUCKETS) else np.inf
        sel = (n_in >= lo) & (n_in < hi)
        if not sel.any():
            continue
        col = {name: _finite(raw.columns[name][keep][sel]) for name in ("ttft_ms", "tpot_ms", "e2e_ms")}
        rows.append(BucketRow(label, int(sel.sum()), quantile(col["ttft_ms"], 0.5), quantile(col["ttft_ms"], 0.99),
                              quantile(col["tpot_ms"], 0.5), quantile(col["tpot_ms"], 0.99),
                              quantile(col["e2e_ms"], 0.5)))  # fmt: skip
    return rows


def _finite(a: np.ndarray) -> np.ndarray:
    return a[np.isfinite(a)]


def per_turn(raw: RawData, engine: str) -> list[tuple[int, int, float | None, float | None, float | None]]:
    """(turn, count, TTFT p50, TTFT p90, TTFT p99) per session turn index, ok requests."""
    keep = raw.mask(engine) & np.isfinite(raw.columns["turn"])
    turns = raw.columns["turn"][keep]
    ttft = raw.columns["ttft_ms"][keep]
    out = []
    for turn in np.unique(turns):
        v = _finite(ttft[turns == turn])
        out.append(
            (int(turn), int((turns == turn).sum()), quantile(v, 0.5), quantile(v, 0.9), quantile(v, 0.99))
        )
    return out


@dataclass
class StageRow:
    stage: str
    sent: int
    ok: int
    window_s: float | None
    requests_per_s: float | None
    output_tokens_per_s: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None


def stages(raw: RawData, engine: str) -> list[StageRow]:
    """Per sweep stage (raw-log ``stage``), in the order stages started: throughput and latency."""
    col = raw.columns
    mine = raw.mask(engine, ok_only=False) & (col["stage"] != None)  # noqa: E711 - numpy elementwise
    names = col["stage"][mine]
    firsts: dict[str, float] = {}
    for name in set(names.tolist()):
        firsts[name] = float(np.nanmin(col["t_send_ns"][mine][names == name]))
    order = sorted(firsts, key=lambda name: firsts[name])
    return [_stage_row(raw, mine & (col["stage"] == name), name) for name in order]


def _stage_row(raw: RawData, sel: np.ndarray, name: str) -> StageRow:
    col = raw.columns
    ok = sel & (col["outcome"] == "ok")
    # The stage's window: its first send to its last end, so rate = what the stage achieved.
    start = float(np.nanmin(col["t_send_ns"][sel]))
    ends = _finite(col["t_end_ns"][sel])
    end = float(ends.max()) if ends.size else start
    window = (end - start) / 1e9 if end > start else None
    tokens = float(np.nansum(col["n_out"][ok]))
    return StageRow(name, int(sel.sum()), int(ok.sum()), window,
                    None if window is None else int(sel.sum()) / window,
                    None if window is None else tokens / window,
                    quantile(_finite(col["ttft_ms"][ok]), 0.5), quantile(_finite(col["ttft_ms"][ok]), 0.99),
                    quantile(_finite(col["tpot_ms"][ok]), 0.5))  # fmt: skip


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
        p50, p99 = np.quantile(v, [0.5, 0.99])
        out["t"].append(float(b * width))
        out["p50"].append(float(p50))
        out["p99"].append(float(p99))
    return out
