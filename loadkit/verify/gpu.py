"""The ``gpu`` section recomputed from gpu.jsonl (the run's GPU samples) and the raw log: each
target's window (first start to last end of its lines, on the wall clock), its ok lines' output
tokens, and the energy over that window, by a second implementation of docs/gpu.md's rule (the
energy counter read at the window's ends between the samples around them, else the power
integral), then J/token and tokens/J."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import orjson

from loadkit.verify.compare import Verdict
from loadkit.verify.rates import has_wall_offsets, request_span, wall_ns
from loadkit.verify.rawlog import Run
from loadkit.verify.recompute import group_by

GPU_LOG = "gpu.jsonl"


def _at(points: list[tuple[float, float]], t: float) -> float:
    """The straight line between the points around t (the first or last point outside them)."""
    ts = [p[0] for p in points]
    i = bisect_right(ts, t)
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (t0, y0), (t1, y1) = points[i - 1], points[i]
    return y0 if t1 == t0 else y0 + (y1 - y0) * (t - t0) / (t1 - t0)


def _area(points: list[tuple[float, float]], a: float, b: float) -> float:
    cuts = [a, *(t for t, _ in points if a < t < b), b]
    return sum((cuts[i + 1] - cuts[i]) * (_at(points, cuts[i]) + _at(points, cuts[i + 1])) / 2
               for i in range(len(cuts) - 1))  # fmt: skip


def energy_j(samples: list[dict[str, Any]], a: float, b: float) -> tuple[float, str, float] | None:
    """(joules, method, share of [a, b] the samples cover), or None."""
    good = sorted((s for s in samples if not s.get("error") and s.get("gpus")), key=lambda s: s["t"])
    gpus = {g for s in good for g in s["gpus"]}
    for key, method in (("energy_mj", "energy_counter"), ("power_w", "power_integral")):
        series = [[(s["t"], s["gpus"][g][key]) for s in good if key in s["gpus"].get(g, {})] for g in gpus]
        if not series or any(len(p) < 2 for p in series):
            continue
        lo, hi = max([a] + [p[0][0] for p in series]), min([b] + [p[-1][0] for p in series])
        if hi <= lo:
            continue
        if key == "energy_mj":
            return sum(_at(p, hi) - _at(p, lo) for p in series) / 1000.0, method, (hi - lo) / (b - a)
        return sum(_area(p, lo, hi) for p in series), method, (hi - lo) / (b - a)
    return None


def gpu(run: Run, v: Verdict) -> None:
    stated = run.report.get("gpu") or {}
    if not stated:
        return
    path = run.report_dir / GPU_LOG
    if not path.is_file():
        v.notes.append(f"the gpu section because the run directory has no {GPU_LOG}")
        return
    samples: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            row = orjson.loads(line)
            samples.setdefault(str(row["target"]), []).append(row)
    if not has_wall_offsets(run.rows):
        v.notes.append("the gpu section because the raw log's lines lack t_wall_offset_ns (an older run)")
        return
    by_engine = group_by(run.rows, "engine")
    for target, section in sorted(stated.items()):
        rows = by_engine.get((target,), [])
        v.exact("gpu", target, "samples", section.get("samples"), len(samples.get(target, [])))
        spans = [(wall_ns(r, s[0]), wall_ns(r, s[1])) for r in rows if (s := request_span(r)) is not None]
        if not spans:
            continue
        a, b = min(s[0] for s in spans) / 1e9, max(s[1] for s in spans) / 1e9
        tokens = sum(r["n_out"] or 0 for r in rows if r["outcome"] == "ok")
        v.exact("gpu", target, "output_tokens", section.get("output_tokens"), tokens)
        got = energy_j(samples.get(target, []), a, b)
        if got is None:
            v.exact("gpu", target, "energy_j", section.get("energy_j"), None)
            continue
        joules, method, covered = got
        # Sample times are float Unix seconds (steps of ~0.2 µs at today's dates): at hundreds of
        # watts two correct implementations of the same rule differ by ~1e-7 of the energy.
        tol = 1e-6
        v.exact("gpu", target, "energy_method", section.get("energy_method"), method)
        v.close("gpu", target, "energy_j", section.get("energy_j"), joules, tol * joules, relative=False)
        if covered < 0.99:  # docs/gpu.md: no per-token figure over a window the samples do not cover
            v.exact("gpu", target, "j_per_output_token", section.get("j_per_output_token"), None)
        elif tokens > 0 and joules > 0:
            v.close("gpu", target, "j_per_output_token", section.get("j_per_output_token"), joules / tokens, tol * joules / tokens,
                    relative=False)  # fmt: skip
            v.close("gpu", target, "output_tokens_per_j", section.get("output_tokens_per_j"), tokens / joules, tol * tokens / joules,
                    relative=False)  # fmt: skip
