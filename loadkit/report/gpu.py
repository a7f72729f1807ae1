"""The report's GPU telemetry (report.json ``gpu``, stats/gpu.py; docs/gpu.md): console lines,
the HTML section (a timeline per figure, one line per GPU, and a table per target), and the
llm-d Benchmark Report's power / utilisation / memory statistics."""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from loadkit.report.htmlutil import not_measured, note, num, section, table
from loadkit.report.svg import Series, line_plot

TITLE = "GPU telemetry and energy"
TIMELINES = (("util_pct", "GPU utilisation", "%"), ("mem_used_mib", "GPU memory used", "MiB"),
             ("power_w", "GPU power", "W"))  # fmt: skip


def _f(value: Any, digits: int = 1) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.{digits}f}"


def console_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for target, g in (report.get("gpu") or {}).items():
        if g.get("energy_j") is None:
            why = "; ".join(f"{k}: {v}" for k, v in (g.get("missing") or {}).items())
            lines.append(f"GPU {target}: not measured ({why})")
            continue
        lines.append(
            f"GPU {target}: {_f(g.get('j_per_output_token'), 3)} J/token, {_f(g.get('output_tokens_per_j'), 2)} "
            f"tokens/J; {_f(g['energy_j'])} J over {_f((g.get('window') or {}).get('seconds'), 2)} s "
            f"({g.get('energy_method')}), mean power {_f(g.get('mean_power_w'))} W, "
            f"mean util {_f(g.get('mean_util_pct'))} %"
        )
    return lines


def _samples(report: dict[str, Any], target: str) -> list[dict[str, Any]]:
    found = ((report.get("manifest") or {}).get("gpu_samples") or {}).get(target) or {}
    return [s for s in found.get("samples") or [] if isinstance(s, dict) and s.get("gpus")]


def _timelines(report: dict[str, Any], target: str, window: dict[str, Any] | None) -> list[Markup]:
    rows = _samples(report, target)
    if not rows:
        return [not_measured(f"gpu-{target}", "no GPU sample")]
    t0 = float(window["start_unix"]) if window else float(rows[0]["t"])
    gpus = sorted({g for s in rows for g in s["gpus"]}, key=lambda g: (len(g), g))
    plots = []
    for key, title, unit in TIMELINES:
        series = []
        for i, gpu in enumerate(gpus):
            pts = [(float(s["t"]) - t0, v) for s in rows
                   if isinstance(v := s["gpus"].get(gpu, {}).get(key), int | float) and math.isfinite(v)]  # fmt: skip
            if pts:
                series.append(Series(f"GPU {gpu}", [p[0] for p in pts], [p[1] for p in pts], i,
                                     markers=len(pts) < 3))  # fmt: skip
        if series:
            plots.append(line_plot(f"gpu-{key}-{target}", f"{target}: {title}", series,
                                   "seconds since the measured window's start", unit, y_lo=0.0))  # fmt: skip
    return plots


def html_section(report: dict[str, Any]) -> str:
    """Empty unless the run was given a GPU source."""
    gpu = report.get("gpu")
    if not gpu:
        return ""
    rows = []
    for target, g in gpu.items():
        window = g.get("window") or {}
        rows.append([target, str(g.get("source")), _f(window.get("seconds"), 2), num(g.get("energy_j")),
                     str(g.get("energy_method") or "-"), num(g.get("j_per_output_token")),
                     num(g.get("output_tokens_per_j")), num(g.get("mean_power_w")), num(g.get("max_power_w")),
                     num(g.get("mean_util_pct")), ", ".join(g.get("available") or []) or "none",
                     "; ".join(f"{k}: {v}" for k, v in (g.get("missing") or {}).items()) or "-"])  # fmt: skip
    parts: list[Any] = [
        table(
            (
                "target",
                "source",
                "window s",
                "energy J",
                "energy from",
                "J/token",
                "tokens/J",
                "mean W",
                "max W",
                "mean util %",
                "available",
                "missing",
            ),
            rows,
        ),  # fmt: skip
        note(
            "Window: the target's measured window (first send to last end of its measured requests). "
            "Energy: the GPUs' energy counter at the window's ends (energy_counter), else the trapezoidal "
            "integral of sampled power (power_integral); J/token divides it by the ok requests' output "
            "tokens in the window. Power is the sum over the target's GPUs."
        ),  # fmt: skip
    ]
    for target, g in gpu.items():
        parts += _timelines(report, target, g.get("window"))
    return section("gpu", TITLE, *parts)


def _stats(values: list[float], units: str) -> dict[str, Any]:
    ordered = sorted(values)
    out: dict[str, Any] = {"units": units, "mean": math.fsum(ordered) / len(ordered),
                           "min": ordered[0], "max": ordered[-1]}  # fmt: skip
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)):
        out[key] = ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    return out


def llmd_resources(report: dict[str, Any], target: str) -> dict[str, Any]:
    """The Benchmark Report's ResourceMetrics fields GPU telemetry fills, over the samples in
    the measured window: power (W, the target's GPUs summed), utilisation (percent, mean over its
    GPUs) and memory used (MiB, summed)."""
    window = ((report.get("gpu") or {}).get(target) or {}).get("window")
    if not window:
        return {}
    rows = [s for s in _samples(report, target) if window["start_unix"] <= s["t"] <= window["end_unix"]]
    out = {}
    for key, field, units, combine in (("power_w", "power_consumption", "Watts", math.fsum),
                                       ("util_pct", "gpu_utilization", "percent", lambda v: math.fsum(v) / len(v)),
                                       ("mem_used_mib", "gpu_memory_usage", "MiB", math.fsum)):  # fmt: skip
        values = [combine([float(g[key]) for g in s["gpus"].values()]) for s in rows
                  if all(key in g for g in s["gpus"].values())]  # fmt: skip
        if values:
            out[field] = _stats(values, units)
    return out


COMPARED = ("j_per_output_token", "output_tokens_per_j")


def engine_metrics(report: dict[str, Any], engine: str) -> dict[str, Any]:
    """What `loadkit compare` and --fail-if read beside an engine section: ``gpu.j_per_output_token``
    and ``gpu.output_tokens_per_j``; None where not measured (a rule on it then fires)."""
    g = (report.get("gpu") or {}).get(engine)
    return {"gpu": {key: g.get(key) if isinstance(g, dict) else None for key in COMPARED}}


def compare_metrics(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, ...]:
    """Compare's GPU rows, when either run measured GPU energy for the engine (one value a run:
    no bootstrap interval)."""
    measured = any(v is not None for s in (a, b) for v in (s.get("gpu") or {}).values())
    return tuple(f"gpu.{key}" for key in COMPARED) if measured else ()


def now_lines(samples: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The web UI's live status: per target its latest GPU sample (power summed over its GPUs,
    utilisation their mean, memory used summed), or the latest read's error."""
    lines = []
    for target, rows in samples.items():
        if not rows:
            continue
        last = rows[-1]
        gpus = list((last.get("gpus") or {}).values())
        if not gpus:
            lines.append(f"{target}: no reading ({last.get('error')})")
            continue
        power = [float(g["power_w"]) for g in gpus if "power_w" in g]
        util = [float(g["util_pct"]) for g in gpus if "util_pct" in g]
        mem = [float(g["mem_used_mib"]) for g in gpus if "mem_used_mib" in g]
        parts = [f"{len(gpus)} GPU(s)"]
        if power:
            parts.append(f"{math.fsum(power):.0f} W")
        if util:
            parts.append(f"util {math.fsum(util) / len(util):.0f} %")
        if mem:
            parts.append(f"memory used {math.fsum(mem):.0f} MiB")
        lines.append(f"{target}: " + ", ".join(parts))
    return lines
