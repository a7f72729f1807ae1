"""Open-loop arrival processes: when each request is *meant* to be sent.

The schedule is generated for the whole run from the scenario's seed, then split: worker i of
n takes arrivals i, i+n, i+2n, ... So the union over workers is exactly the asked process (not
n copies of it), and each worker's share is deterministic.

Models (rates in requests/s, offsets in seconds from the start of the run):
- constant: one arrival every 1/rate.
- poisson: exponential inter-arrival times with mean 1/rate (CV = 1).
- gamma: gamma inter-arrival times with mean 1/rate and coefficient of variation `cv`
  (shape k = 1/cv², scale = 1/(rate·k)); cv > 1 is burstier than Poisson, cv < 1 smoother.
- trace: the offsets a trace gives (already scaled by the trace's speed).
Stages make the rate a step function of time; a stage with `ramp_to` changes linearly from
`rate` to `ramp_to` over its duration (the inter-arrival draw uses the rate at the current
time, which is exact for step changes and a close approximation within a ramp).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

OPEN_MODELS = ("constant", "poisson", "gamma", "trace")


@dataclass(frozen=True, slots=True)
class Stage:
    duration_s: float
    rate: float
    cv: float = 1.0
    ramp_to: float | None = None
    name: str = ""

    def rate_at(self, t_in_stage: float) -> float:
        if self.ramp_to is None:
            return self.rate
        frac = min(1.0, max(0.0, t_in_stage / self.duration_s))
        return self.rate + (self.ramp_to - self.rate) * frac


def stages_from_spec(spec: dict[str, Any]) -> list[Stage]:
    """The scenario's arrival table as stages; no stages = one endless stage at `rate`."""
    default_cv = float(spec.get("cv", 1.0))
    raw = spec.get("stages") or []
    if not raw:
        return [Stage(float("inf"), float(spec["rate"]), default_cv, None, "main")]
    return [
        Stage(
            float(s["duration_s"]),
            float(s["rate"]),
            float(s.get("cv", default_cv)),
            float(s["ramp_to"]) if s.get("ramp_to") is not None else None,
            str(s.get("name") or f"stage{i + 1}"),
        )
        for i, s in enumerate(raw)
    ]


def _gap(model: str, rate: float, cv: float, rng: np.random.Generator) -> float:
    if model == "constant":
        return 1.0 / rate
    if model == "poisson":
        return float(rng.exponential(1.0 / rate))
    shape = 1.0 / (cv * cv)
    return float(rng.gamma(shape, 1.0 / (rate * shape)))


def arrival_offsets(model: str, stages: list[Stage], seed: int) -> Iterator[tuple[float, str]]:
    """Global (offset_s, stage name) pairs, in order, until the last stage ends."""
    if model not in ("constant", "poisson", "gamma"):
        raise ValueError(f"arrival model {model!r} has no generated schedule")
    rng = np.random.default_rng([seed, 0xA77])
    start = 0.0
    for stage in stages:
        end = start + stage.duration_s
        t = start
        while True:
            rate = stage.rate_at(t - start)
            if rate <= 0:
                # An idle stage (rate 0): skip to its end, nothing arrives.
                break
            t += _gap(model, rate, stage.cv, rng)
            if t >= end:
                break
            yield t, stage.name
        start = end


def worker_share(
    offsets: Iterable[tuple[float, str]], index: int, workers: int
) -> Iterator[tuple[float, str]]:
    """Arrivals index, index+workers, ...: disjoint shares whose union is the whole schedule."""
    if not 0 <= index < workers:
        raise ValueError(f"worker index {index} outside 0..{workers - 1}")
    return islice(offsets, index, None, workers)


def trace_share(offsets: Iterable[float], index: int, workers: int) -> Iterator[tuple[float, str]]:
    return worker_share(((float(t), "trace") for t in offsets), index, workers)


def realised_stats(offsets: list[float]) -> dict[str, float | None]:
    """Rate and inter-arrival CV of a realised schedule (None when too short to say)."""
    if len(offsets) < 3:
        return {"count": len(offsets), "rate": None, "cv": None}
    arr = np.asarray(offsets, dtype=float)
    gaps = np.diff(np.sort(arr))
    span = float(arr.max() - arr.min())
    mean = float(gaps.mean())
    return {
        "count": len(offsets),
        "rate": (len(offsets) - 1) / span if span > 0 else None,
        "cv": float(gaps.std(ddof=1) / mean) if mean > 0 else None,
    }
