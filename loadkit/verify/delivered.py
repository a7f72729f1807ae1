"""The ``delivered`` section recomputed from the raw log: per (target, stage) the requests sent,
the arrivals (the scheduled sends; every send when none was scheduled), the realised rate and
inter-arrival CV of those sends, the rate error against the asked rate the report states, the
concurrency reached (peak and time-averaged requests in flight) and the asked/realised length
pairs (which the section takes from ``lengths``, checked in checks.py).

docs/reports.md ("Delivered load") defines them: rate = (n − 1) / (last send − first send),
CV = sample standard deviation of the gaps / their mean, peak = the most requests in flight
at once (an end at the same instant as a send frees its slot first), mean = Σ durations /
(last end − first send). The report takes send times on the wall clock; one process's raw log
differs from it by one constant offset, which every one of these figures cancels.
"""

from __future__ import annotations

import math
from typing import Any

from loadkit.verify.asked import check_asked
from loadkit.verify.compare import Verdict
from loadkit.verify.fit import ALPHA, check_fit
from loadkit.verify.rates import clock_slack_s, has_wall_offsets, wall_ns
from loadkit.verify.rawlog import Run
from loadkit.verify.recompute import group_by

NS_PER_S = 1_000_000_000
WIRE_S = 1e-6  # a worker ships times in whole µs (floored): a difference of two is off by < 1 µs
# Two wall-clock offsets one process took of the same clocks at its start (its raw log's, its
# delivered section's): each is two consecutive clock reads (Unix, monotonic), apart by far
# less than this unless the process was descheduled between them; on the matrix's runs they
# agree within 1 µs.
OFFSETS_AGREE_S = 1e-4
LENGTH_PAIRS = (
    ("input_tokens", "input_target", "input_server"),
    ("output_tokens", "output_asked", "output_server"),
)


def realised(sends_ns: list[int]) -> tuple[float | None, float | None]:
    """Rate (per s) and CV of the gaps of sorted send times; None below three sends."""
    if len(sends_ns) < 3:
        return None, None
    span_s = (sends_ns[-1] - sends_ns[0]) / NS_PER_S
    gaps = [(b - a) / NS_PER_S for a, b in zip(sends_ns, sends_ns[1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    var = sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)
    rate = (len(sends_ns) - 1) / span_s if span_s > 0 else None
    return rate, (math.sqrt(var) / mean if mean > 0 else None)


def in_flight(
    rows: list[dict[str, Any]], placed: bool = False, widen_s: float = 0.0
) -> tuple[int, float | None]:
    """Peak requests in flight and their time average over first send to last end; ``placed``:
    on the wall clock each line states; ``widen_s``: each request taken that much earlier and
    later (negative: later and earlier), bounding the peak when each time is known within it."""
    widen = round(widen_s * NS_PER_S)
    sends = [(wall_ns(r, r["t_send_ns"]) if placed else r["t_send_ns"]) - widen for r in rows]
    ends = [(wall_ns(r, r["t_send_ns"] if r["t_end_ns"] is None else r["t_end_ns"]) if placed
             else r["t_send_ns"] if r["t_end_ns"] is None else r["t_end_ns"]) + widen for r in rows]  # fmt: skip
    ends = [max(e, s) for s, e in zip(sends, ends, strict=True)]
    # At one instant an end (-1) comes before a send (+1): a slot freed is taken again.
    steps = sorted([(t, 1) for t in sends] + [(t, -1) for t in ends])
    level = peak = 0
    for _, step in steps:
        level += step
        peak = max(peak, level)
    span = max(ends) - min(sends)
    mean = sum(e - s for s, e in zip(sends, ends, strict=True)) / span if span > 0 else None
    return peak, mean


def delivered(run: Run, v: Verdict) -> None:
    report = run.report.get("delivered")
    if report is None:
        return
    s = "delivered"
    by_target = report.get("by_target") or {}
    mine = group_by(run.rows, "engine", "stage")
    keys = {(engine, "run" if stage is None else stage) for engine, stage in mine}
    v.exact(s, "*", "targets and stages", sorted(keys),
            sorted((e, st) for e, t in by_target.items() for st in (t.get("stages") or {})))  # fmt: skip
    v.exact(s, "*", "alpha", report.get("alpha"), ALPHA)
    slack = clock_slack_s(run)
    wire = bool((run.report.get("workers") or {}).get("nodes"))  # times came from workers, in µs
    # Several processes on one machine whose lines state their wall-clock offsets: each send on
    # that wall clock, one timeline, within what two offsets one process took may differ by.
    walled = bool(slack) and has_wall_offsets(run.rows)
    timed = slack == 0.0 or walled
    eps = (WIRE_S if wire else 0.0) + (OFFSETS_AGREE_S if walled else 0.0)
    if slack is None:
        v.notes.append("delivered realised rate, CV, rate_error, concurrency and fit because the raw log comes "
                       "from processes on several machines, whose monotonic clocks cannot be put on one "
                       "timeline (counts checked)")  # fmt: skip
    elif slack and not walled:
        v.notes.append("delivered realised CV, concurrency and fit of several processes because a send's place "
                       "among the other processes' is known only within their clocks' offsets (lines without "
                       "t_wall_offset_ns; counts and rates checked)")  # fmt: skip
    elif walled:
        v.remarks.append(f"delivered figures of {len({r.get('worker') for r in run.rows})} processes: each send is "
                         "put on the wall clock by its line's t_wall_offset_ns; the section took each process's "
                         f"offset apart, so every time is known within {OFFSETS_AGREE_S * 1e6:g} µs of its place "
                         "among the other processes' sends, and rate, CV, concurrency and fit are compared within "
                         "what that moves them")  # fmt: skip
    models = set()
    timelines: dict[str, tuple[list[int], list[int], list[Any]]] = {}
    for (engine, stage), rows in sorted(mine.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        name = "run" if stage is None else stage
        row = ((by_target.get(engine) or {}).get("stages") or {}).get(name)
        key = f"{engine} / {name}"
        if row is None:
            continue  # named by the "targets and stages" figure
        models.add((row.get("asked") or {}).get("model"))
        truncated = row.get("truncated_requests") or 0
        v.exact(s, key, "requests + truncated_requests", row.get("requests", 0) + truncated, len(rows))
        if truncated:
            v.notes.append(f"delivered {key} realised, concurrency and fit because the section keeps the first "
                           f"{row.get('requests')} requests only ({truncated} more): its figures are of that "
                           "prefix")  # fmt: skip
            continue
        scheduled = [r for r in rows if r.get("t_sched_ns") is not None]
        placed = walled or slack == 0.0
        placed_rows = sorted(((_at(r, r["t_send_ns"], placed), r.get("worker")) for r in (scheduled or rows)),
                             key=lambda p: p[0])  # fmt: skip
        arrivals = [t for t, _ in placed_rows]
        v.exact(s, key, "arrivals", row.get("arrivals"), len(arrivals))
        rate, cv = realised(arrivals)
        got = row.get("realised") or {}
        if not timed:
            if slack:  # several processes on one machine: the span within the offsets and 1 µs of wire
                span_s = (arrivals[-1] - arrivals[0]) / NS_PER_S
                if rate is not None and got.get("rate") is not None and span_s > slack:
                    v.close(s, key, "realised.rate", got["rate"], rate, _rate_slack(rate, span_s, slack + WIRE_S),
                            False)  # fmt: skip
            continue
        # Lags are differences of one process's times: no offset in them; a worker ships whole µs.
        lags = [(r["t_send_ns"] - r["t_sched_ns"]) for r in scheduled]
        timelines[key] = (
            arrivals,
            [(x // 1000) * 1000 for x in lags] if wire else lags,
            [w for _, w in placed_rows],
        )
        span_s = (arrivals[-1] - arrivals[0]) / NS_PER_S
        rate_tol = _rate_slack(rate, span_s, 2 * eps) if rate is not None else 0.0
        _close_or_none(v, s, key, "realised.rate", got.get("rate"), rate, rate_tol)
        _close_or_none(
            v, s, key, "realised.cv", got.get("cv"), cv, _cv_slack(arrivals, 2 * eps) if cv is not None else 0
        )
        asked = (row.get("asked") or {}).get("rate")
        want = None if rate is None or not asked else rate / asked - 1.0
        _close_or_none(v, s, key, "rate_error (realised over the stated asked rate)", row.get("rate_error"), want,
                       rate_tol / asked if asked else 0.0)  # fmt: skip
        conc = row.get("concurrency") or {}
        peak, mean = in_flight(rows, placed)
        if not eps:
            v.exact(s, key, "concurrency.peak", conc.get("peak"), peak)
        else:  # each time within eps of its place: the peak lies between these two
            low, _ = in_flight(rows, placed, -eps)
            high, _ = in_flight(rows, placed, eps)
            figure = f"concurrency.peak (between {low} and {high}: each time within {eps * 1e6:g} µs)"
            got_peak = conc.get("peak")
            ok = isinstance(got_peak, int) and low <= got_peak <= high
            v.exact(s, key, figure, got_peak if not ok else peak, peak)
        durations_s = sum(((r["t_end_ns"] or r["t_send_ns"]) - r["t_send_ns"]) for r in rows) / NS_PER_S
        mean_tol = 0.0
        if mean is not None and eps:
            whole_s = durations_s / mean
            mean_tol = (durations_s + len(rows) * 2 * WIRE_S * wire) / max(whole_s - 2 * eps, 1e-9) - mean
        _close_or_none(v, s, key, "concurrency.mean", conc.get("mean"), mean, mean_tol)
    if wire and timed:
        v.remarks.append("delivered figures of a worker's requests: the worker ships its send and end times in "
                         "whole µs, so rates, CV, concurrency and the fit are compared within what 1 µs per time "
                         "moves them")  # fmt: skip
    if mine:
        model = next(iter(models)) if len(models) == 1 else "mixed"
        v.exact(s, "*", "arrival_model", report.get("arrival_model"), model)
    lengths = (run.report.get("lengths") or {}).get("by_target") or {}
    for engine, target in sorted(by_target.items()):
        pairs, source = target.get("lengths"), lengths.get(engine)
        if pairs is None or source is None:
            continue
        for name, asked_name, got_name in LENGTH_PAIRS:
            for figure, side, stat in (("asked_mean", asked_name, "mean"), ("realised_mean", got_name, "mean"),
                                       ("asked_p50", asked_name, "p50"), ("realised_p50", got_name, "p50")):  # fmt: skip
                # The lengths section's own figures are recomputed in checks.lengths.
                v.exact(s, engine, f"lengths.{name}.{figure}", (pairs.get(name) or {}).get(figure),
                        (source.get(side) or {}).get(stat))  # fmt: skip
    parts = check_asked(run, v, by_target, mine)
    for (engine, stage), _rows in sorted(mine.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        key = f"{engine} / {'run' if stage is None else stage}"
        if key not in timelines:
            continue
        row = by_target[engine]["stages"]["run" if stage is None else stage]
        part = parts.get(key)
        why = part if isinstance(part, str) else "the scenario's trace was not read"
        if row.get("servegen"):
            part, why = (
                None,
                "its asked schedule is synthesised from the ServeGen file's statistics with the seed",
            )
        elif (row.get("asked") or {}).get("model") == "tenants":
            part, why = None, "the tenants' own schedule is drawn from their arrival processes with the seed"
        arrivals, lags, processes = timelines[key]
        note = check_fit(v, key, row, arrivals, lags, part if isinstance(part, list) else None, eps, why, processes,
                         WIRE_S if wire else 0.0)  # fmt: skip
        if note:
            v.notes.append(note)


def _at(row: dict[str, Any], t_ns: int, placed: bool) -> int:
    """A time of ``row`` on the timeline its row is compared on: the raw log's own clock for
    one process (one offset cancels), else the wall clock its line states."""
    return wall_ns(row, t_ns) if placed else t_ns


def _close_or_none(v: Verdict, section: str, key: str, figure: str, report: Any, mine: float | None,
                   tolerance: float = 0.0) -> None:  # fmt: skip
    """Equal within ``tolerance`` and float rounding (Verdict.close allows 1e-9 of the value);
    None only with None."""
    if mine is None or report is None:
        v.exact(section, key, figure, report, mine)
    else:
        v.close(section, key, figure, report, mine, tolerance, False)


def _rate_slack(rate: float, span_s: float, eps_s: float) -> float:
    """How far (n − 1) / (span ± eps) may lie from (n − 1) / span."""
    return rate * eps_s / max(span_s - eps_s, 1e-9) if eps_s else 0.0


def _cv_slack(sends_ns: list[int], eps_s: float) -> float:
    """How far the CV may move when every gap moves by less than ``eps_s``: the mean by eps,
    the standard deviation by at most eps·√(n/(n−1)) (the shift's own norm)."""
    if not eps_s:
        return 0.0
    gaps = [(b - a) / NS_PER_S for a, b in zip(sends_ns, sends_ns[1:], strict=False)]
    n = len(gaps)
    mean = sum(gaps) / n
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1))
    d_sd = eps_s * math.sqrt(n / (n - 1))
    if mean <= eps_s:
        return math.inf
    return max((sd + d_sd) / (mean - eps_s) - sd / mean, sd / mean - max(sd - d_sd, 0.0) / (mean + eps_s))
