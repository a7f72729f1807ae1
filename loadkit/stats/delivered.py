"""Delivered load: what the run actually sent, per target and stage, beside what was asked.

Every node keeps its requests' send and end times (Unix ns, so nodes' clocks line up); the
master merges them and reports, per (target, stage): the asked and realised rate and
inter-arrival CV (``arrival.realised_stats`` on the merged send times), a Kolmogorov–Smirnov
test of the realised gaps against the asked distribution (exponential for poisson, gamma for
gamma, the trace's own gaps for trace; none for constant or ramps, whose gaps are not one
distribution), and the concurrency reached (peak and time-averaged in-flight requests).
Lengths asked vs realised per target come from the ``lengths`` section (lengthstats.py).

Per key at most ``CAP`` requests are kept (the first ones), so a long run's snapshots stay
small; the section says when it is a prefix of the run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from loadkit.stats.goodness import MIN_GAPS, exponential_cdf, gamma_cdf, ks_one_sample, ks_two_sample
from loadkit.workload.arrival import Stage, realised_stats, stages_from_spec

# Models whose asked arrivals are the source's own schedule (a trace's offsets, or the tenants'
# own processes superposed: tenantplan.py): realised gaps are tested against that schedule's.
SCHEDULED = ("trace", "tenants")
CAP = 20_000
ALPHA = 0.01  # the test's verdict: "consistent" unless p < ALPHA
NS = 1_000_000_000


class DeliveredLoad:
    """This node's (or, merged, the run's) send/end times per (target, stage)."""

    def __init__(self) -> None:
        self.wall_offset_ns = time.time_ns() - time.perf_counter_ns()
        self.sends: dict[tuple[str, str], list[int]] = {}
        self.ends: dict[tuple[str, str], list[int]] = {}
        # Whether each request had a scheduled time: in open loop only those are arrivals (a
        # session's later turns follow its think time, not the arrival process).
        self.scheduled: dict[tuple[str, str], list[bool]] = {}
        self.truncated: dict[tuple[str, str], int] = {}

    def add(self, record: Any) -> None:
        key = (record.engine, record.stage or "run")
        sends = self.sends.setdefault(key, [])
        if len(sends) >= CAP:
            self.truncated[key] = self.truncated.get(key, 0) + 1
            return
        send = record.t_send_ns + self.wall_offset_ns
        sends.append(send)
        end = record.t_end_ns
        self.ends.setdefault(key, []).append(send if end is None else end + self.wall_offset_ns)
        self.scheduled.setdefault(key, []).append(record.t_sched_ns is not None)

    def merge(self, other: DeliveredLoad) -> None:
        for key, sends in other.sends.items():
            self.sends.setdefault(key, []).extend(sends)
            self.ends.setdefault(key, []).extend(other.ends[key])
            self.scheduled.setdefault(key, []).extend(other.scheduled[key])
        for key, n in other.truncated.items():
            self.truncated[key] = self.truncated.get(key, 0) + n

    def to_wire(self) -> list[dict[str, Any]]:
        out = []
        for (engine, stage), sends in self.sends.items():
            base = sends[0] if sends else 0
            out.append({"engine": engine, "stage": stage, "base": base,
                        "send_us": [(s - base) // 1000 for s in sends],
                        "end_us": [(e - base) // 1000 for e in self.ends[(engine, stage)]],
                        "scheduled": [int(b) for b in self.scheduled[(engine, stage)]],
                        "truncated": self.truncated.get((engine, stage), 0)})  # fmt: skip
        return out

    @classmethod
    def from_wire(cls, data: list[dict[str, Any]]) -> DeliveredLoad:
        out = cls()
        for item in data:
            key, base = (str(item["engine"]), str(item["stage"])), int(item["base"])
            out.sends[key] = [base + int(u) * 1000 for u in item["send_us"]]
            out.ends[key] = [base + int(u) * 1000 for u in item["end_us"]]
            out.scheduled[key] = [bool(b) for b in item["scheduled"]]
            if item.get("truncated"):
                out.truncated[key] = int(item["truncated"])
        return out

    def report(self, arrival: dict[str, Any] | None, trace_offsets: list[float] | None,
               lengths: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``delivered`` section: asked vs realised per target and stage (docs/reports.md)."""
        arrival = dict(arrival or {"model": "closed"})
        by_target: dict[str, Any] = {}
        for (engine, stage), sends in sorted(self.sends.items()):
            row = stage_row(arrival, trace_offsets, stage, np.asarray(sends, dtype=np.int64),
                            np.asarray(self.ends[(engine, stage)], dtype=np.int64),
                            np.asarray(self.scheduled[(engine, stage)], dtype=bool))
            row["truncated_requests"] = self.truncated.get((engine, stage), 0)
            by_target.setdefault(engine, {"stages": {}})["stages"][stage] = row
        for engine, section in by_target.items():
            section["lengths"] = _lengths_pair((lengths or {}).get(engine))
        return {"arrival_model": arrival.get("model"), "alpha": ALPHA, "by_target": by_target}


def stage_row(arrival: dict[str, Any], trace_offsets: list[float] | None, stage: str, sends: np.ndarray,
              ends: np.ndarray, scheduled: np.ndarray) -> dict[str, Any]:
    """One (target, stage): asked, realised, the fit test and the concurrency reached."""
    arrivals = np.sort(sends[scheduled] if scheduled.any() else sends)
    offsets = ((arrivals - arrivals[0]) / NS).tolist() if len(arrivals) else []
    realised = realised_stats(offsets)
    asked = asked_for(arrival, trace_offsets, stage)
    gaps = np.diff(np.asarray(offsets))
    return {"requests": int(len(sends)), "arrivals": len(offsets), "asked": asked,
            "realised": {"rate": realised["rate"], "cv": realised["cv"]},
            "rate_error": _rel(realised["rate"], asked.get("rate")),
            "fit": fit_test(arrival.get("model", "closed"), asked, gaps, trace_offsets),
            "concurrency": concurrency(sends, ends)}  # fmt: skip


def asked_for(arrival: dict[str, Any], trace_offsets: list[float] | None, stage: str) -> dict[str, Any]:
    """What the scenario asked of this stage: model, rate (req/s) and inter-arrival CV."""
    model = arrival.get("model", "closed")
    if model == "closed":
        return {"model": "closed", "rate": None, "cv": None, "users": arrival.get("users")}
    if model in SCHEDULED:
        stats = realised_stats(list(trace_offsets or []))
        return {"model": model, "rate": stats["rate"], "cv": stats["cv"]}
    found = _stage(stages_from_spec(arrival), stage)
    if found is None:
        return {"model": model, "rate": None, "cv": None, "note": f"no stage {stage!r} in the scenario"}
    cv = {"constant": 0.0, "poisson": 1.0}.get(model, found.cv)
    out: dict[str, Any] = {"model": model, "rate": found.rate, "cv": cv}
    if found.ramp_to is not None:
        out.update(rate=None, ramp=[found.rate, found.ramp_to])
    return out


def _stage(stages: list[Stage], name: str) -> Stage | None:
    if len(stages) == 1 and name in ("run", stages[0].name):
        return stages[0]
    return next((s for s in stages if s.name == name), None)


def fit_test(model: str, asked: dict[str, Any], gaps: np.ndarray,
             trace_offsets: list[float] | None) -> dict[str, Any]:
    """KS of the realised gaps against the asked gap distribution, or why there is none."""
    rate = asked.get("rate")
    if model not in ("poisson", "gamma", *SCHEDULED) or (model not in SCHEDULED and not rate):
        reason = ("constant gaps: compare the CV (asked 0)" if model == "constant" else
                  "closed loop: no asked arrival process" if model == "closed" else
                  "a ramp's gaps are not one distribution")
        return {"test": None, "reason": reason}
    if len(gaps) < MIN_GAPS:
        return {"test": None, "reason": f"fewer than {MIN_GAPS} inter-arrival gaps"}
    if model in SCHEDULED:
        what = "the trace" if model == "trace" else "the tenants' schedule"
        asked_gaps = np.diff(np.sort(np.asarray(trace_offsets or [], dtype=float)))
        if len(asked_gaps) < MIN_GAPS:
            return {"test": None, "reason": f"{what} has fewer than {MIN_GAPS} gaps"}
        d, p = ks_two_sample(gaps, asked_gaps)
        return _verdict(f"ks-2sample vs {what}'s gaps", d, p, len(gaps))
    rate = float(asked["rate"])
    cdf = exponential_cdf(rate) if model == "poisson" else gamma_cdf(rate, float(asked["cv"]))
    d, p = ks_one_sample(gaps, cdf)
    return _verdict(f"ks vs {'exponential' if model == 'poisson' else 'gamma'}", d, p, len(gaps))


def _verdict(test: str, d: float, p: float, n: int) -> dict[str, Any]:
    return {"test": test, "statistic": d, "p_value": p, "gaps": n, "consistent": p >= ALPHA}


def concurrency(sends: np.ndarray, ends: np.ndarray) -> dict[str, Any]:
    """Peak requests in flight (an end at the same ns as a send frees its slot first) and the
    time average over the stage (Little's law: Σ durations / span)."""
    if len(sends) == 0:
        return {"peak": None, "mean": None}
    times = np.concatenate([sends, ends])
    steps = np.concatenate([np.ones(len(sends)), -np.ones(len(ends))])
    order = np.lexsort((steps, times))
    peak = int(np.cumsum(steps[order]).max())
    span = float(ends.max() - sends.min())
    mean = float((ends - sends).sum() / span) if span > 0 else None
    return {"peak": peak, "mean": mean}


def _lengths_pair(target: dict[str, Any] | None) -> dict[str, Any] | None:
    """Asked vs realised length means and p50s of one target, from the lengths section."""
    if not target:
        return None
    pairs = {"input_tokens": ("input_target", "input_server"), "output_tokens": ("output_asked", "output_server")}
    out = {}
    for name, (asked, got) in pairs.items():
        a, r = target.get(asked) or {}, target.get(got) or {}
        out[name] = {"asked_mean": a.get("mean"), "realised_mean": r.get("mean"),
                     "asked_p50": a.get("p50"), "realised_p50": r.get("p50")}  # fmt: skip
    return out


def _rel(value: float | None, ref: float | None) -> float | None:
    return None if value is None or not ref else value / ref - 1.0


def console_lines(report: dict[str, Any]) -> list[str]:
    """One line per target and stage for the console summary."""
    section = report.get("delivered") or {}
    lines = []
    for engine, target in (section.get("by_target") or {}).items():
        for stage, row in target["stages"].items():
            asked, got, fit = row["asked"], row["realised"], row["fit"]
            test = ("" if fit.get("test") is None else
                    f", {fit['test']} p={fit['p_value']:.3f}{'' if fit['consistent'] else ' (NOT as asked)'}")
            lines.append(f"delivered {engine}/{stage}: rate {_f(got['rate'])}/s (asked {_f(asked.get('rate'))}), "
                         f"CV {_f(got['cv'])} (asked {_f(asked.get('cv'))}){test}, "
                         f"in flight peak {row['concurrency']['peak']}")
    return lines


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
