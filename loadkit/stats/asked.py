"""What a run asked of one (target, stage), and the test of what it delivered against that.

"Asked" is the sending user classes' own arrival process (issue 31), given to the delivered
section as a *context* per target (stats/builtin.py builds it from the run's workloads):

- ``{"arrival": {...}}``: the class's scenario [arrival] table (poisson, gamma, constant, a
  ramp, closed loop at N users). Under a locustfile's LoadTestShape each step is a stage of
  constant users (``users``: the step's level), and so is each stage of a closed stage plan; an open-loop scenario keeps its own process in
  every step (its schedule does not follow the user count).
- ``{"arrival": {"model": "trace"}, "offsets": [...], "covered_s": X}``: a trace replay; asked
  is the part of the trace whose offsets fall in the X s the run's schedule actually ran
  (a run stopped by ``-t`` before the window's end is not judged against the whole window).
- ``{"not_asked": "why"}``: loadkit does not know the pacing (a user class's own tasks, or
  several classes with different processes superposed on one target): no judgement.

The fit test compares inter-arrival gaps at the client's scheduling resolution: both the
realised and the asked gaps are floored to ``resolution_ms`` (1 ms, or the stage's measured
schedule-lag p99 when larger) before the Kolmogorov–Smirnov test. A send can only be placed
to within its lag, so gaps finer than that (a trace's sub-ms bursts) are not a difference the
client could have made; the report states the resolution used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from loadkit.stats.goodness import MIN_GAPS, exponential_cdf, gamma_cdf, kolmogorov_p, ks_two_sample
from loadkit.workload.arrival import Stage, realised_stats, stages_from_spec

# Models whose asked arrivals are the source's own schedule (a trace's offsets, or the tenants'
# own processes superposed: tenantplan.py): realised gaps are tested against that schedule's.
SCHEDULED = ("trace", "tenants")
NOT_ASKED = "not asked"
ALPHA = 0.01  # the test's verdict: "consistent" unless p < ALPHA
MIN_RESOLUTION_MS = 1.0


def asked_offsets(context: dict[str, Any]) -> list[float]:
    """A scheduled model's asked offsets: those the run's schedule reached (all when not cut)."""
    offsets = sorted(float(x) for x in context.get("offsets") or [])
    covered = context.get("covered_s")
    if covered is None:
        return offsets
    return [x for x in offsets if x <= float(covered)]


def asked_for(context: dict[str, Any], stage: str) -> dict[str, Any]:
    """What the sending classes asked of this stage: model, rate (req/s) and inter-arrival CV."""
    if context.get("not_asked"):
        return {"model": NOT_ASKED, "rate": None, "cv": None, "reason": context["not_asked"]}
    arrival = dict(context.get("arrival") or {"model": "closed"})
    model = arrival.get("model", "closed")
    step_users = context.get("users")
    if model == "closed" and step_users is None:
        step_users = _closed_stage_users(arrival, stage)  # a closed stage plan's level
    if model == "closed":
        out: dict[str, Any] = {
            "model": "closed",
            "rate": None,
            "cv": None,
            "users": step_users if step_users is not None else arrival.get("users"),
        }
        if step_users is not None:
            out["stage_kind"] = "constant users"
        return out
    if model in SCHEDULED:
        cut = asked_offsets(context)
        stats = realised_stats(cut)
        out = {"model": model, "rate": stats["rate"], "cv": stats["cv"]}
        whole = sorted(float(x) for x in context.get("offsets") or [])
        if len(cut) < len(whole):
            span = whole[-1] if whole else 0.0
            out["covered_s"] = float(context["covered_s"])
            out["note"] = (
                f"the run covered {float(context['covered_s']):.1f} s of the trace's {span:.1f} s: "
                f"asked is its {len(cut)} of {len(whole)} arrivals in that time"
            )
        return out
    found = _stage(stages_from_spec(arrival), stage)
    if found is None:
        return {"model": model, "rate": None, "cv": None, "note": f"no stage {stage!r} in the scenario"}
    cv = {"constant": 0.0, "poisson": 1.0}.get(model, found.cv)
    out = {"model": model, "rate": found.rate, "cv": cv}
    if found.ramp_to is not None:
        out.update(rate=None, ramp=[found.rate, found.ramp_to])
    if step_users is not None:
        out["users"] = step_users  # a shape's step: the open-loop process does not follow it
    return out


def _closed_stage_users(arrival: dict[str, Any], name: str) -> int | None:
    """The users a closed loop's stage plan gives stage ``name`` (stage_plan's names), or None."""
    for i, s in enumerate(arrival.get("stages") or []):
        if str(s.get("name") or f"stage{i + 1}") == name and s.get("users") is not None:
            return int(s["users"])
    return None


def _stage(stages: list[Stage], name: str) -> Stage | None:
    # A scenario without [arrival] stages has one process for the whole run: every stage of the
    # run (a load shape's steps too) is asked that one.
    if len(stages) == 1:
        return stages[0]
    return next((s for s in stages if s.name == name), None)


def resolution_ms(lags_ns: np.ndarray) -> float:
    """The scheduling resolution the gaps are compared at: 1 ms, or the lag p99 (whole ms) if larger."""
    if len(lags_ns) == 0:
        return MIN_RESOLUTION_MS
    p99 = float(np.quantile(np.maximum(lags_ns, 0), 0.99)) / 1e6
    return max(MIN_RESOLUTION_MS, float(math.ceil(p99)))


def fit_test(
    context: dict[str, Any], asked: dict[str, Any], gaps: np.ndarray, resolution: float
) -> dict[str, Any]:
    """KS of the realised gaps against the asked gap distribution at ``resolution`` ms, or why there is none."""
    model = asked.get("model", "closed")
    rate = asked.get("rate")
    if model not in ("poisson", "gamma", *SCHEDULED) or (model not in SCHEDULED and not rate):
        reason = (
            "constant gaps: compare the CV (asked 0)"
            if model == "constant"
            else "closed loop: no asked arrival process"
            if model == "closed"
            else f"not asked: {asked.get('reason')}"
            if model == NOT_ASKED
            else "a ramp's gaps are not one distribution"
        )
        return {"test": None, "reason": reason}
    if len(gaps) < MIN_GAPS:
        return {"test": None, "reason": f"fewer than {MIN_GAPS} inter-arrival gaps"}
    step = resolution / 1e3
    realised = np.floor(np.asarray(gaps, dtype=float) / step) * step
    if model in SCHEDULED:
        what = "the trace" if model == "trace" else "the tenants' schedule"
        asked_gaps = np.diff(np.asarray(asked_offsets(context), dtype=float))
        if len(asked_gaps) < MIN_GAPS:
            return {"test": None, "reason": f"{what} has fewer than {MIN_GAPS} gaps"}
        d, p = ks_two_sample(realised, np.floor(asked_gaps / step) * step)
        return _verdict(f"ks-2sample vs {what}'s gaps", d, p, len(gaps), resolution)
    rate = float(asked["rate"])
    cdf = exponential_cdf(rate) if model == "poisson" else gamma_cdf(rate, float(asked["cv"]))
    d = ks_floored(realised, cdf, step)
    p = kolmogorov_p(d, len(realised))
    return _verdict(f"ks vs {'exponential' if model == 'poisson' else 'gamma'}", d, p, len(gaps), resolution)


def ks_floored(floored: np.ndarray, cdf: Any, step: float) -> float:
    """KS distance of gaps floored to ``step`` from a continuous gap CDF floored the same way:
    at each value k·step the floored law's CDF is cdf((k+1)·step) and its left limit cdf(k·step),
    compared with the sample's CDF and its left limit there (ties are whole steps)."""
    values, counts = np.unique(np.asarray(floored, dtype=float), return_counts=True)
    n = counts.sum()
    right = np.cumsum(counts) / n
    left = right - counts / n
    d = max(np.max(np.abs(right - cdf(values + step))), np.max(np.abs(left - cdf(values))))
    return float(d)


def _verdict(test: str, d: float, p: float, n: int, resolution: float) -> dict[str, Any]:
    return {
        "test": test,
        "statistic": d,
        "p_value": p,
        "gaps": n,
        "consistent": p >= ALPHA,
        "resolution_ms": resolution,
    }
