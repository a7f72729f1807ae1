"""A ServeGen replay's delivered load per ServeGen window: the file, the synthesis, the run.

A ServeGen file gives per 600 s window a rate and an inter-arrival CV; loadkit synthesises a
schedule from them (workload/servegen.py) and the client sends that schedule. The stage's
"asked" (stats/asked.py) is the synthesised schedule, so the stage's fit test judges the
client. Whether the synthesis kept to the file is a separate question, answered per window:

- asked (file): the window's rate (× the trace's speed, in run req/s) and CV as written;
- synthesised: the arrivals the schedule placed in the window's covered part, their rate
  (count / covered run seconds) and the sample CV of their gaps;
- realised: the scheduled sends that are those arrivals (the k-th scheduled send, in
  scheduled-time order, is the k-th synthesised arrival), their count / covered seconds and
  the sample CV of their send-time gaps.

Windows with fewer than ``MIN_ARRIVALS`` synthesised arrivals are reported, not judged. A
judged window's synthesis is "faithful" when its CV is within ``CV_TOLERANCE`` of the file's;
a sample of n arrivals cannot show a CV above √(n − 1) (all gaps but one zero), which the row
states as ``cv_ceiling`` (docs/reports.md: 600 s at 3.3 req/s hold 1,980 arrivals, ceiling 44.5).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from loadkit.stats.asked import fit_test
from loadkit.stats.goodness import MIN_GAPS

MIN_ARRIVALS = MIN_GAPS + 1  # the fit test's own minimum of gaps
CV_TOLERANCE = 0.25  # synthesised CV within 25 % of the file's: "faithful"
NS = 1_000_000_000
CONSOLE_WINDOWS = 6  # the console shows this many windows of a stage (report.html: HTML_WINDOWS)


def window_plan(context: dict[str, Any]) -> list[dict[str, Any]]:
    """The ServeGen windows the run covered, in run seconds from the schedule's start."""
    sg = context["servegen"]
    lo, speed, width = float(sg["from_s"]), float(sg["speed"]), float(sg["width_s"])
    hi = float(sg["to_s"])
    covered = context.get("covered_s")
    plan = []
    for w in sg["windows"]:
        a, b = max(float(w["start_s"]), lo), min(float(w["start_s"]) + width, hi)
        run_a, run_b = (a - lo) / speed, (b - lo) / speed
        end = run_b if covered is None else min(run_b, float(covered))
        if end <= run_a:
            continue
        full = a == float(w["start_s"]) and b == float(w["start_s"]) + width and end == run_b
        plan.append({**w, "run_from_s": run_a, "run_to_s": run_b, "covered_s": end - run_a, "full": full})
    return plan


def windows_table(
    context: dict[str, Any],
    sends: np.ndarray,
    scheduled: np.ndarray,
    lags: np.ndarray,
    resolution: float,
) -> dict[str, Any]:
    """The ``servegen`` block of a ServeGen stage row (docs/reports.md "delivered")."""
    sg = context["servegen"]
    speed = float(sg["speed"])
    plan = window_plan(context)
    one_pass = (float(sg["to_s"]) - float(sg["from_s"])) / speed
    covered = context.get("covered_s")
    stop = one_pass if covered is None else min(one_pass, float(covered))
    synth = np.sort(np.asarray([x for x in context.get("offsets") or [] if x < one_pass and x <= stop]))
    # Scheduled times on the sends' clock (send − lag, in send order), then by scheduled time.
    sent = sends[scheduled]
    order = np.lexsort((sent, sent - lags[: len(sent)])) if len(sent) == len(lags) else np.argsort(sent)
    in_order = sent[order]
    rows, k = [], 0
    for w in plan:
        cut = synth[(synth >= w["run_from_s"]) & (synth < w["run_from_s"] + w["covered_s"])]
        mine = np.sort(in_order[k : k + len(cut)])
        k += len(cut)
        rows.append(_row(w, speed, cut, mine, resolution))
    judged = [r for r in rows if r["judged"]]
    far = [r for r in judged if not r["synthesis"]["faithful"]]
    missed = [r for r in judged if r["client"]["consistent"] is False]
    out = {
        "trace": sg["path"],
        "speed": speed,
        "width_s": float(sg["width_s"]),
        "min_arrivals": MIN_ARRIVALS,
        "cv_tolerance": CV_TOLERANCE,
        "windows": rows,
        "judged": len(judged),
        "synthesis_far": [r["start_s"] for r in far],
        "client_missed": [r["start_s"] for r in missed],
        "verdict": _verdict(len(judged), far, missed),
    }
    if len(in_order) > k:
        out["note"] = (
            f"{len(in_order) - k} arrivals after the file window's first pass (a loop) are not in a row"
        )
    return out


def _row(
    w: dict[str, Any], speed: float, cut: np.ndarray, mine: np.ndarray, resolution: float
) -> dict[str, Any]:
    covered = float(w["covered_s"])
    # Seconds from the window's first send: wall-clock ns as a float of seconds would lose 0.2 µs.
    mine = (mine - mine[0]) / NS if len(mine) else mine.astype(float)
    s_cv, r_cv = _cv(cut), _cv(mine)
    file_cv = float(w["cv"]) if float(w["rate"]) > 0 else None
    row: dict[str, Any] = {
        "start_s": float(w["start_s"]),
        "part": "full" if w["full"] else "part",
        "covered_s": covered,
        "file": {"rate": float(w["rate"]) * speed, "cv": file_cv, "family": w.get("family") or None},
        "synthesised": {"arrivals": len(cut), "rate": len(cut) / covered, "cv": s_cv},
        "realised": {"arrivals": len(mine), "rate": len(mine) / covered, "cv": r_cv},
        "judged": len(cut) >= MIN_ARRIVALS,
    }
    if not row["judged"]:
        row["reason"] = f"fewer than {MIN_ARRIVALS} synthesised arrivals: reported, not judged"
        return row
    ceiling = math.sqrt(len(cut) - 1)
    faithful = file_cv is not None and s_cv is not None and abs(s_cv / file_cv - 1.0) <= CV_TOLERANCE
    row["synthesis"] = {"faithful": faithful, "cv_ceiling": ceiling}
    if not faithful and file_cv is not None and file_cv > ceiling:
        row["synthesis"]["reason"] = (
            f"{len(cut)} arrivals cannot show a CV above √{len(cut) - 1} = {ceiling:.1f} (the file asks {file_cv:.3g})"
        )
    elif not faithful and file_cv is not None and (s_cv or 0.0) < file_cv:
        row["synthesis"]["reason"] = (
            f"{len(cut)} draws of a gap law with CV {file_cv:.3g} rarely hold the few huge gaps that make "
            f"its CV (a sample of {len(cut)} shows at most {ceiling:.1f})"
        )
    context = {"arrival": {"model": "trace"}, "offsets": cut.tolist()}
    fit = fit_test(context, {"model": "trace"}, np.diff(mine), resolution)
    consistent = fit.get("consistent")
    if len(mine) != len(cut):  # a slot dropped, or not reached: not the synthesised schedule
        consistent = False
    row["client"] = {"consistent": consistent, "p_value": fit.get("p_value"),
                     "test": fit.get("test") or fit.get("reason")}  # fmt: skip
    return row


def _cv(times_s: np.ndarray) -> float | None:
    if len(times_s) < 3:
        return None
    gaps = np.diff(np.sort(times_s))
    mean = float(gaps.mean())
    return float(gaps.std(ddof=1) / mean) if mean > 0 else None


def _verdict(judged: int, far: list[dict[str, Any]], missed: list[dict[str, Any]]) -> str:
    if not judged:
        return f"no window has {MIN_ARRIVALS} arrivals: per-window figures reported, not judged"
    client = (
        f"the client sent the synthesised schedule in {judged - len(missed)} of {judged} judged windows"
        f" (at least {MIN_ARRIVALS} arrivals each)"
    )
    if not far:
        return f"{client}; the synthesis kept the file's CV (within {CV_TOLERANCE:.0%}) in every one"
    worst = max(far, key=lambda r: abs(math.log((r["synthesised"]["cv"] or 1e-9) / r["file"]["cv"])))
    return (
        f"{client}; NOT as the file asks: the synthesised CV is off the file's by more than "
        f"{CV_TOLERANCE:.0%} in {len(far)} of {judged} (window {worst['start_s']:g} s: file CV "
        f"{worst['file']['cv']:.3g}, synthesised {_g(worst['synthesised']['cv'])}, realised "
        f"{_g(worst['realised']['cv'])})"
    )


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def console_lines(engine: str, stage: str, table: dict[str, Any], first: int = CONSOLE_WINDOWS) -> list[str]:
    """The windows of one ServeGen stage for the console: the first ``first``, then a count."""
    lines = [f"  servegen {engine}/{stage}: {table['verdict']}"]
    for r in table["windows"][:first]:
        f, s, g = r["file"], r["synthesised"], r["realised"]
        judged = "" if r["judged"] else f" (not judged: < {table['min_arrivals']} arrivals)"
        far = "" if not r["judged"] or r["synthesis"]["faithful"] else " (synthesis far from the file)"
        lines.append(
            f"    window {r['start_s']:g} s ({r['part']}, {r['covered_s']:.4g} s): file {_g(f['rate'])}/s "
            f"CV {_g(f['cv'])}, synthesised {s['arrivals']} at {_g(s['rate'])}/s CV {_g(s['cv'])}, "
            f"realised {g['arrivals']} at {_g(g['rate'])}/s CV {_g(g['cv'])}{judged}{far}"
        )
    if len(table["windows"]) > first:
        lines.append(f"    … {len(table['windows']) - first} more windows in report.json delivered")
    return lines
