"""The live page's four charts, drawn on the server by the report's own SVG code
(``loadkit.report.svg``), so report.html and /loadkit/ share one chart implementation.

Each chart is an ``<svg id="ttft|tpot|tokps|inflight">`` built from the series of
stats.json (windowed TTFT/TPOT percentiles, per-second tokens and in-flight, server queue),
served as /loadkit/charts.json; the page swaps it in at each poll. Text in them (engine
names) is escaped by the templates.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loadkit.report.svg import LEFT, RIGHT, WIDTH, Series, line_plot

COLUMNS = WIDTH - LEFT - RIGHT  # pixels across the plot area

Points = dict[str, dict[str, list[Any]]]  # engine → column → values


def _origin(windowed: Points, seconds: Points, queue: Points) -> float:
    """The earliest timestamp of any series: every chart's x axis starts there."""
    firsts = [c["t"][0] for g in (windowed, queue) for c in g.values() if c["t"]]
    firsts += [c["unix"][0] for c in seconds.values() if c["unix"]]
    return min(firsts, default=0.0)


def _xs(values: list[float], t0: float) -> list[float]:
    return [round(v - t0, 3) for v in values]


def _series(name: str, xs: list[float], ys: list[Any], t0: float, color: int, dashed: bool = False) -> Series:
    """One line; columns of unequal length (a series still filling) are cut to the shorter."""
    n = min(len(xs), len(ys))
    return Series(name, _xs(xs[:n], t0), ys[:n], color=color, dashed=dashed)


def _thin(s: Series) -> Series:
    """At most the lowest and highest point per pixel column (in x order): an hour of points
    draws the same line, spikes included, for a fraction of the work (the page redraws it)."""
    points = [(x, y) for x, y in zip(s.xs, s.ys, strict=True) if x is not None and y is not None]
    if len(points) <= 2 * COLUMNS:
        return s
    x0, span = points[0][0], (points[-1][0] - points[0][0]) or 1.0
    keep: dict[int, tuple[int, int]] = {}
    for i, (x, y) in enumerate(points):
        col = int((x - x0) / span * (COLUMNS - 1))
        lo, hi = keep.setdefault(col, (i, i))
        keep[col] = (i if y < points[lo][1] else lo, i if y > points[hi][1] else hi)
    idx = sorted({i for pair in keep.values() for i in pair})
    return replace(s, xs=[points[i][0] for i in idx], ys=[points[i][1] for i in idx])


def _latency(windowed: Points, metric: str, t0: float) -> list[Series]:
    out = []
    for i, engine in enumerate(sorted(windowed)):
        d = windowed[engine]
        out.append(_series(f"{engine} p50", d["t"], d[f"{metric}_p50"], t0, i))
        out.append(_series(f"{engine} p99", d["t"], d[f"{metric}_p99"], t0, i, dashed=True))
    return out


def _per_second(seconds: Points, column: str, t0: float) -> list[Series]:
    return [_series(e, seconds[e]["unix"], seconds[e][column], t0, i) for i, e in enumerate(sorted(seconds))]


def _queue(queue: Points, engines: list[str], t0: float) -> list[Series]:
    """Server queue length (dashed, the engine's colour), where it was scraped at all."""
    out = []
    for engine, d in sorted(queue.items()):
        if any(v is not None for v in d["waiting"]):
            i = engines.index(engine) if engine in engines else len(engines)
            out.append(_series(f"{engine} queue", d["t"], d["waiting"], t0, i, dashed=True))
    return out


def live_charts(doc: dict[str, Any]) -> dict[str, str]:
    """chart id → SVG markup, from a stats.json document."""
    windowed, seconds, queue = doc["windowed"], doc["seconds"], doc.get("queue") or {}
    t0 = _origin(windowed, seconds, queue)
    window = f"last {doc['window_s']:g} s"
    xlabel = "seconds since the first point"
    inflight = _per_second(seconds, "in_flight", t0) + _queue(queue, sorted(seconds), t0)
    specs = (("ttft", f"TTFT ms, p50 solid, p99 dashed ({window})", _latency(windowed, "ttft_ms", t0), "ms"),
             ("tpot", f"TPOT ms, p50 solid, p99 dashed ({window})", _latency(windowed, "tpot_ms", t0), "ms"),
             ("tokps", "Output tokens/s (per second)", _per_second(seconds, "output_tokens", t0), "tokens/s"),
             ("inflight", "In flight (solid), server queue (dashed)", inflight, "requests"))  # fmt: skip
    return {chart: str(line_plot(f"live-{chart}", title if series else f"{title}: no data yet",
                                 [_thin(s) for s in series], xlabel,
                                 ylabel, y_lo=0.0, svg_id=chart))
            for chart, title, series, ylabel in specs}  # fmt: skip
