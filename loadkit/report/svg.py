"""Inline SVG charts drawn in Python: line plots (linear or log axes) and grouped bar charts.

Every chart is ``<svg class="plot" data-plot="ID">`` with a title, axes, ticks and a legend,
and renders without JavaScript; tooltips are SVG ``<title>`` elements. Drawn marks carry
``class="series"`` so a test can find them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from markupsafe import Markup

from loadkit.report.htmlutil import environment

WIDTH, PLOT_H = 600, 250
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 34, 46
LEGEND_ROW = 18
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")  # fmt: skip


@dataclass
class Series:
    name: str
    xs: Sequence[float | None]
    ys: Sequence[float | None]
    color: int = 0
    dashed: bool = False
    markers: bool = False


@dataclass
class Bars:
    """One group of bars (one per category); ``None`` values draw nothing."""

    name: str
    values: Sequence[float | None]
    color: str
    opacity: float = 1.0


@cache
def _marks() -> Any:
    return environment().get_template("chart.svg.j2").module


def _mark(name: str, *args: Any) -> Markup:
    """A text-carrying SVG mark from chart.svg.j2 (its text is escaped there)."""
    return Markup(getattr(_marks(), name)(*args))


def _shape(svg: str) -> Markup:
    """A mark made of numbers and code-chosen colours only: nothing in it to escape."""
    return Markup(svg)


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass
class Scale:
    lo: float
    hi: float
    log: bool
    start: float  # pixel of lo
    end: float  # pixel of hi

    def __call__(self, v: float) -> float:
        a, b, x = self.lo, self.hi, v
        if self.log:
            a, b, x = math.log10(a), math.log10(b), math.log10(max(v, self.lo))
        frac = 0.5 if b == a else (x - a) / (b - a)
        return self.start + frac * (self.end - self.start)


def fmt_num(v: float) -> str:
    """Short tick label: 0.05, 2.5, 120, 12k, 1.5M."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if a >= 1 or a == 0:
        return f"{v:.4g}"
    return f"{v:.2g}"


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Round-number ticks covering [lo, hi] (steps of 1, 2, 5 × 10^k)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    count = int(math.ceil((hi - first) / step - 1e-9)) + 1
    return [round(first + i * step, 12) for i in range(count)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decade ticks (1, 10, 100 ...), with 2 and 5 between them when there are few decades."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1, 2, 5) if b - a <= 3 else (1,)
    ticks = [m * 10.0**e for e in range(a, b + 1) for m in mults]
    below = max(t for t in ticks if t <= lo * (1 + 1e-9))
    above = min(t for t in ticks if t >= hi * (1 - 1e-9))
    return [t for t in ticks if below <= t <= above]


def _domain(
    values: list[float], log: bool, lo: float | None, hi: float | None
) -> tuple[float, float, list[float]]:
    finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    vmin = lo if lo is not None else (min(finite) if finite else (1.0 if log else 0.0))
    vmax = hi if hi is not None else (max(finite) if finite else vmin + 1.0)
    if log:
        vmin = max(vmin, 1e-3)
        ticks = log_ticks(vmin, max(vmax, vmin * 1.01))
        return ticks[0], ticks[-1], ticks
    ticks = nice_ticks(vmin, vmax)
    return ticks[0], ticks[-1], ticks


def _legend(items: list[tuple[str, str, str]], y0: float) -> tuple[list[Markup], float]:
    """Legend entries (name, CSS colour, "line" | "dashed" | "bar" | "bar:<opacity>")."""
    parts, x, y = [], LEFT, y0
    for name, fill, kind in items:
        width = 26 + 7 * len(name)
        if x + width > WIDTH - RIGHT and x > LEFT:
            x, y = LEFT, y + LEGEND_ROW
        if kind.startswith("bar"):
            opacity = kind.partition(":")[2] or "1"
            mark = _shape(
                f'<rect x="{x}" y="{y - 10}" width="16" height="10" fill="{fill}" fill-opacity="{opacity}"/>'
            )
        else:
            dash = ' stroke-dasharray="5 3"' if kind == "dashed" else ""
            mark = _shape(
                f'<line x1="{x}" y1="{y - 4}" x2="{x + 18}" y2="{y - 4}" stroke="{fill}" stroke-width="3"{dash}/>'
            )
        parts += [mark, _mark("text", x + 22, y, "lg", "", name)]
        x += width + 10
    return parts, y


def _axes(xs: Scale, ys: Scale, xt: list[float], yt: list[float], xlabel: str, ylabel: str) -> list[Markup]:
    bottom, top = ys.start, ys.end
    out = [
        _shape(f'<rect x="{LEFT}" y="{top}" width="{xs.end - LEFT}" height="{bottom - top}" class="frame"/>')
    ]
    for t in xt:
        x = xs(t)
        out += [_shape(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" class="grid"/>'),
                _mark("text", f"{x:.1f}", bottom + 14, "tk", "middle", fmt_num(t))]  # fmt: skip
    for t in yt:
        y = ys(t)
        out += [_shape(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{xs.end}" y2="{y:.1f}" class="grid"/>'),
                _mark("text", LEFT - 5, f"{y + 4:.1f}", "tk", "end", fmt_num(t))]  # fmt: skip
    out.append(_mark("text", (LEFT + xs.end) / 2, bottom + 32, "al", "middle", xlabel))
    mid = (top + bottom) / 2
    out.append(_mark("text", 14, mid, "al", "middle", ylabel, f"rotate(-90 14 {mid})"))
    return out


def _frame(plot_id: str, title: str, body: list[Markup], legend: list[tuple[str, str, str]],
           svg_id: str = "") -> Markup:  # fmt: skip
    leg, last_y = _legend(legend, TOP + PLOT_H + BOTTOM + 6)
    return _mark("frame", plot_id, title, WIDTH, int(last_y + 10), body + leg, svg_id)


def _drawable(v: float | None, scale: Scale) -> bool:
    return v is not None and math.isfinite(v) and (v > 0 or not scale.log)


def _path(s: Series, xs: Scale, ys: Scale) -> Markup:
    pts = [(xs(x), ys(y)) for x, y in zip(s.xs, s.ys, strict=True)
           if x is not None and y is not None and _drawable(x, xs) and _drawable(y, ys)]  # fmt: skip
    if not pts:
        return Markup()
    d = "M" + " L".join(f"{x:.1f} {y:.1f}" for x, y in pts)
    out = _mark("path", d, color(s.color), s.dashed, s.name)
    if s.markers or len(pts) == 1:
        out += _mark("dots", pts, color(s.color), s.name)
    return out


def line_plot(plot_id: str, title: str, series: list[Series], xlabel: str, ylabel: str, *,
              x_log: bool = False, y_log: bool = False, y_lo: float | None = None,
              y_hi: float | None = None, x_integer: bool = False, x_lo: float | None = None,
              x_hi: float | None = None, svg_id: str = "") -> Markup:  # fmt: skip
    """A line chart; with ``x_log``/``y_log`` that axis is log10 (values ≤ 0 are not drawn)."""
    x0, x1, xt = _domain([float(v) for s in series for v in s.xs if v is not None], x_log, x_lo, x_hi)
    if x_integer:  # turn indexes: no 1.5th turn
        xt = [t for t in xt if float(t).is_integer()]
    y0, y1, yt = _domain([float(v) for s in series for v in s.ys if v is not None], y_log, y_lo, y_hi)
    xs = Scale(x0, x1, x_log, LEFT, WIDTH - RIGHT)
    ys = Scale(y0, y1, y_log, TOP + PLOT_H, TOP)
    body = _axes(xs, ys, xt, yt, xlabel, ylabel) + [_path(s, xs, ys) for s in series]
    legend = [(s.name, color(s.color), "dashed" if s.dashed else "line") for s in series]
    return _frame(plot_id, title, body, legend, svg_id)


def bar_plot(plot_id: str, title: str, categories: list[str], groups: list[Bars], ylabel: str, *,
             stacked: bool = False) -> Markup:  # fmt: skip
    """Bars per category: one bar per group side by side, or stacked."""

    def level(i: int) -> float:
        vals = [v for g in groups if (v := g.values[i]) is not None and math.isfinite(v)]
        return (sum(vals) if stacked else max(vals)) if vals else 0.0

    y0, y1, yt = _domain([0.0, *(level(i) for i in range(len(categories)))], False, 0.0, None)
    ys = Scale(y0, y1, False, TOP + PLOT_H, TOP)
    slot = (WIDTH - RIGHT - LEFT) / max(1, len(categories))
    body = _axes(Scale(0, 1, False, LEFT, WIDTH - RIGHT), ys, [], yt, "", ylabel)
    for i, cat in enumerate(categories):
        body.append(_mark("text", f"{LEFT + slot * (i + 0.5):.1f}", TOP + PLOT_H + 14, "tk", "middle", cat))
        body += _bars(i, slot, groups, ys, stacked)
    return _frame(plot_id, title, body, [(g.name, g.color, f"bar:{g.opacity:g}") for g in groups])


def _bars(i: int, slot: float, groups: list[Bars], ys: Scale, stacked: bool) -> list[Markup]:
    out, base = [], 0.0
    width = slot * 0.8 / (1 if stacked else max(1, len(groups)))
    for g, group in enumerate(groups):
        v = group.values[i]
        if v is None or not math.isfinite(v):
            continue
        x = LEFT + slot * (i + 0.1) + (0 if stacked else g * width)
        top, bottom = ys(base + v), ys(base)
        out.append(_mark("bar", f"{x:.1f}", f"{top:.1f}", f"{width:.1f}", f"{max(bottom - top, 0.0):.1f}",
                         group.color, f"{group.opacity:g}", f"{group.name}: {fmt_num(v)}"))  # fmt: skip
        base = base + v if stacked else base
    return out
