"""report.json ``gpu``: per target, the GPU figures over its measured window (docs/gpu.md).

The window is the target's own measured window, the one its throughput is divided by: first
send to last end of its measured requests (warm-up excluded; ``window_s`` in its engine
section). Its output tokens are the engine section's ``output_tokens`` (ok requests' n_out,
server usage where sent), so J/token and tokens/J divide the same tokens by the energy the
target's GPUs drew over the same seconds.

Energy: the difference of the GPUs' energy counter (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, or
NVML's total energy), read at the window's ends by linear interpolation between the samples
that bracket them; else the trapezoidal integral of sampled power over the window. Which one
was used is stated (``energy_method``). A window the samples do not cover end to end is
clipped to the samples, and ``coverage`` says how much of it they covered.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

NS_PER_S = 1_000_000_000
FIGURES = ("util_pct", "mem_used_mib", "power_w", "energy_mj", "gr_active")


# The share of the measured window the samples must cover for J/token and tokens/J.
MIN_COVERAGE = 0.99


def interpolate(ts: list[float], ys: list[float], t: float) -> float:
    """y at t on the piecewise-linear line through the points (ts ascending), clamped at the ends."""
    if t <= ts[0]:
        return ys[0]
    if t >= ts[-1]:
        return ys[-1]
    lo, hi = 0, len(ts) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ts[mid] <= t:
            lo = mid
        else:
            hi = mid
    span = ts[hi] - ts[lo]
    return ys[lo] if span <= 0 else ys[lo] + (ys[hi] - ys[lo]) * (t - ts[lo]) / span


def trapezoid(ts: list[float], ys: list[float], a: float, b: float) -> float:
    """∫ from a to b of the piecewise-linear line through the points (a, b inside [ts[0], ts[-1]])."""
    xs = [a] + [t for t in ts if a < t < b] + [b]
    vs = [interpolate(ts, ys, x) for x in xs]
    return math.fsum((xs[i + 1] - xs[i]) * (vs[i] + vs[i + 1]) / 2 for i in range(len(xs) - 1))


def _series(samples: list[dict[str, Any]], gpu: str, key: str) -> tuple[list[float], list[float]]:
    pts = [(float(s["t"]), float(v)) for s in samples
           if isinstance(v := (s.get("gpus") or {}).get(gpu, {}).get(key), int | float) and math.isfinite(v)]  # fmt: skip
    return [p[0] for p in pts], [p[1] for p in pts]


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def target_gpu(section: Mapping[str, Any], window_ns: tuple[int | None, int | None],
               output_tokens: int) -> dict[str, Any]:  # fmt: skip
    """The figures of one target from its scraped samples (``section``: source, interval, samples)."""
    samples = sorted((s for s in section.get("samples") or [] if isinstance(s, dict)), key=lambda s: s["t"])
    good = [s for s in samples if not s.get("error") and s.get("gpus")]
    errors = [s["error"] for s in samples if s.get("error")]
    out: dict[str, Any] = {"source": section.get("source"), "interval_s": section.get("interval_s"),
                           "samples": len(samples), "failed_samples": len(errors),
                           "last_error": errors[-1] if errors else None}  # fmt: skip
    missing: dict[str, str] = {}
    start_ns, end_ns = window_ns
    if start_ns is None or end_ns is None or end_ns <= start_ns:
        missing["window"] = "the target has no measured request"
        return {**out, "window": None, "available": [], "missing": missing}
    a, b = start_ns / NS_PER_S, end_ns / NS_PER_S
    out["window"] = {"start_unix": a, "end_unix": b, "seconds": b - a}
    out["output_tokens"] = output_tokens
    if not good:
        why = f"every GPU sample failed ({errors[-1]})" if errors else "no GPU sample was taken"
        return {**out, "available": [], "missing": {"all": why}}
    gpus = sorted({g for s in good for g in s["gpus"]}, key=lambda g: (len(g), g))
    out["gpus"] = {
        g: {k: v for k, v in good[-1]["gpus"].get(g, {}).items() if k in ("uuid", "model")} for g in gpus
    }
    available = sorted({k for s in good for gpu in s["gpus"].values() for k in gpu if k in FIGURES},
                       key=FIGURES.index)  # fmt: skip
    for key in FIGURES:
        if key not in available:
            missing[key] = "the source did not report it"
    inside = [s for s in good if a <= s["t"] <= b]
    per_gpu = [s["gpus"] for s in inside]
    util = [float(g["util_pct"]) for gs in per_gpu for g in gs.values() if "util_pct" in g]
    out["mean_util_pct"] = _mean(util)
    # Power of the target: the sum over its GPUs at each sample (every GPU reported).
    totals = [math.fsum(float(g["power_w"]) for g in gs.values()) for gs in per_gpu
              if gs and all("power_w" in g for g in gs.values())]  # fmt: skip
    out["mean_power_w"] = _mean(totals)
    out["max_power_w"] = max(totals) if totals else None
    mem = [math.fsum(float(g["mem_used_mib"]) for g in gs.values()) for gs in per_gpu
           if all("mem_used_mib" in g for g in gs.values())]  # fmt: skip
    out["max_mem_used_mib"] = max(mem) if mem else None
    if not inside:
        missing["in_window"] = "no GPU sample fell inside the measured window"
    energy, method, covered = _energy(good, gpus, a, b)
    out["energy_j"], out["energy_method"] = energy, method
    out["coverage"] = covered / (b - a)
    if energy is None:
        missing["energy"] = "neither an energy counter nor power on every GPU over the window"
    # Per token only over a window the samples cover: the tokens are the whole window's, so energy
    # over part of it would give a J/token too low by the share not covered.
    whole = energy is not None and out["coverage"] >= MIN_COVERAGE
    out["j_per_output_token"] = (
        energy / output_tokens if whole and energy is not None and output_tokens > 0 else None
    )
    out["output_tokens_per_j"] = output_tokens / energy if whole and energy and output_tokens > 0 else None
    if energy is not None and output_tokens <= 0:
        missing["per_token"] = "no output token in the window"
    elif energy is not None and not whole:
        missing["per_token"] = (f"the GPU samples cover {100 * out['coverage']:.1f} % of the measured window "
                                f"(at least {100 * MIN_COVERAGE:g} % needed): its tokens against part of its energy "
                                "would understate J/token")  # fmt: skip
    return {**out, "available": available, "missing": missing}


def _energy(
    good: list[dict[str, Any]], gpus: list[str], a: float, b: float
) -> tuple[float | None, str | None, float]:
    """(joules, method, seconds covered) over [a, b], summed over the GPUs."""
    series = [_series(good, g, "energy_mj") for g in gpus]
    if all(len(ts) >= 2 for ts, _ in series):
        lo, hi = max(a, max(ts[0] for ts, _ in series)), min(b, min(ts[-1] for ts, _ in series))
        if hi > lo:
            mj = math.fsum(interpolate(ts, ys, hi) - interpolate(ts, ys, lo) for ts, ys in series)
            return mj / 1000.0, "energy_counter", hi - lo
    series = [_series(good, g, "power_w") for g in gpus]
    if all(len(ts) >= 2 for ts, _ in series):
        lo, hi = max(a, max(ts[0] for ts, _ in series)), min(b, min(ts[-1] for ts, _ in series))
        if hi > lo:
            return math.fsum(trapezoid(ts, ys, lo, hi) for ts, ys in series), "power_integral", hi - lo
    return None, None, 0.0


def gpu_section(
    samples: Mapping[str, Any] | None, windows: Mapping[str, tuple[int | None, int | None, int]]
) -> dict[str, Any]:
    """Per target with a GPU source: its figures. ``windows``: target → (first send ns, last
    end ns, output tokens) of its measured requests."""
    out = {}
    for target, section in (samples or {}).items():
        if isinstance(section, dict):
            start, end, tokens = windows.get(target, (None, None, 0))
            out[target] = target_gpu(section, (start, end), tokens)
    return out


def windows_of(merged: Mapping[tuple[str, str], Any]) -> dict[str, tuple[int | None, int | None, int]]:
    """Per target (engine key), its measured window and output tokens, over its labels' groups."""
    out: dict[str, tuple[int | None, int | None, int]] = {}
    for (target, _label), group in merged.items():
        start, end, tokens = out.get(target, (None, None, 0))
        first, last = group.first_send_wall_ns, group.last_end_wall_ns
        start = first if start is None else start if first is None else min(start, first)
        end = last if end is None else end if last is None else max(end, last)
        out[target] = (start, end, tokens + group.output_tokens)
    return out


def gpu_fields(manifest: Mapping[str, Any], merged: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """``{"gpu": ...}`` for the report when the run had a GPU source; nothing otherwise, so the
    reports of runs without one are unchanged."""
    samples = manifest.get("gpu_samples")
    return {"gpu": gpu_section(samples, windows_of(merged))} if samples else {}
