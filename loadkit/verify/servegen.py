"""A ServeGen replay's per-window figures (report.json ``delivered`` … ``servegen``) rechecked.

The file side comes from the ServeGen trace CSV the manifest's scenario names, read here by a
reader of its own (rows ``window_start_s, rate, cv, family, …``; no loadkit.workload code): per
window the rate × the trace's speed, the CV and the family, the window's covered seconds, and
for a window the run's schedule covered whole, the synthesised arrival count the synthesis
documents (round(rate × covered file seconds), docs/load-models.md). The realised side comes
from the raw log: the stage's scheduled sends in scheduled-time order, the first n₁ of them
the first window's, the next n₂ the second's (nᵢ: the window's synthesised arrivals), each
window's count, count / covered seconds, and the sample CV of its send-time gaps.

Not recomputed: the synthesised CV (the synthesis draws it from the seed) and the fit test;
the synthesised count of a window cut by ``-t`` (it depends on where the run stopped).
"""

from __future__ import annotations

import csv
import math
import os
import statistics
from pathlib import Path
from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.rates import clock_slack_s
from loadkit.verify.rawlog import Run

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "data"  # this installation's loadkit/data
S = "delivered"


def trace_spec(run: Run) -> dict[str, Any] | None:
    """The scenario's [trace] table as the manifest records it, when it is a ServeGen replay."""
    scenario = run.manifest.get("scenario") or {}
    trace = (scenario.get("lengths_asked") or {}).get("trace") or {}
    return trace if trace.get("format") == "servegen" else None


def trace_path(run: Run, raw: str) -> Path:
    """A [trace] path as the scenario wrote it: variables and ~ expanded, relative to the scenario."""
    text = raw.replace("${LOADKIT_PACKAGE_DATA}", str(PACKAGE_DATA))
    text = text.replace("${LOADKIT_DATA}", os.environ.get("LOADKIT_DATA") or str(PACKAGE_DATA))
    path = Path(os.path.expanduser(os.path.expandvars(text)))
    where = (run.manifest.get("scenario") or {}).get("path")
    if not path.is_absolute() and where:
        path = Path(where).parent / path
    return path.resolve()


def read_csv(path: Path) -> list[tuple[float, float, float, str]]:
    """(start s, rate, cv, family) per row of a ServeGen trace CSV, in file order."""
    rows = []
    with path.open(newline="", encoding="utf-8") as fh:
        for cells in csv.reader(fh):
            if cells and any(c.strip() for c in cells):
                rows.append((float(cells[0]), float(cells[1]), float(cells[2]), cells[3].strip()))
    return rows


def cv_of(sends_ns: list[int]) -> float | None:
    """Sample standard deviation of the gaps over their mean; None below three sends."""
    if len(sends_ns) < 3:
        return None
    gaps = [(b - a) / 1e9 for a, b in zip(sends_ns, sends_ns[1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    return statistics.stdev(gaps) / mean if mean > 0 else None


def servegen_windows(run: Run, v: Verdict) -> None:
    """Every ServeGen stage's per-window rows, against the trace file and the raw log."""
    spec = trace_spec(run)
    stages = [(e, st, row["servegen"], row.get("truncated_requests") or 0) for e, t in ((run.report.get("delivered") or {}).get("by_target") or {}).items()
              for st, row in (t.get("stages") or {}).items() if row.get("servegen")]  # fmt: skip
    if spec is None:
        if stages:
            v.exact(S, "*", "servegen windows of a scenario that is no ServeGen replay", len(stages), 0)
        return
    v.exact(S, "*", "ServeGen stages with per-window rows", len(stages) > 0, True)
    path = trace_path(run, str(spec["path"]))
    try:
        rows = read_csv(path)
    except (OSError, ValueError, IndexError) as exc:
        v.notes.append(
            f"delivered servegen windows because the scenario's trace {path} cannot be read ({exc})"
        )
        return
    starts = [r[0] for r in rows]
    width = (
        statistics.median(b - a for a, b in zip(starts, starts[1:], strict=False)) if len(rows) > 1 else 600.0
    )
    lo = float(spec["start_s"]) if spec.get("start_s") is not None else starts[0]
    hi = float(spec["end_s"]) if spec.get("end_s") is not None else starts[-1] + width
    speed = float(spec.get("speed", 1.0))
    inside = [r for r in rows if r[0] + width > lo and r[0] < hi]
    slack = clock_slack_s(run)
    dropped = sum(int(s.get("dropped") or 0) for s in (run.manifest.get("schedule") or {}).values())
    for engine, stage, table, truncated in stages:
        key = f"{engine} / {stage} / servegen"
        named = str(Path(str(table.get("trace", ""))).resolve())
        if named != str(path):  # another checkout's copy of a shipped file, or a moved one
            v.notes.append(f"delivered {key} against the trace the report names, {named}, because its file side is "
                           f"checked against {path}, which the manifest's scenario names here")  # fmt: skip
        v.exact(S, key, "speed", table.get("speed"), speed)
        reported = table.get("windows") or []
        v.exact(S, key, "window starts (a prefix of the file's in the cut)",
                [w.get("start_s") for w in reported], [r[0] for r in inside[: len(reported)]])  # fmt: skip
        _file_side(v, key, reported, inside, lo, hi, width, speed, table)
        mine = [r for r in run.rows if r["engine"] == engine and (r.get("stage") or "run") == stage
                and r.get("t_sched_ns") is not None]  # fmt: skip
        if slack != 0.0:
            v.notes.append(f"delivered {key} realised per window because the sends are of several processes")
        elif truncated:
            v.notes.append(f"delivered {key} realised per window because the section kept a prefix of the "
                           f"stage ({truncated} requests more)")  # fmt: skip
        elif dropped:
            v.notes.append(f"delivered {key} realised per window because {dropped} slots were dropped, so the "
                           "k-th send is not the k-th synthesised arrival")  # fmt: skip
        else:
            _realised_side(v, key, reported, mine)
    v.notes.append("delivered servegen windows' asked side (synthesised CV, per-window fit, the synthesised count of a "
                   "window the run cut short) because the synthesis draws from the seed")  # fmt: skip


def _file_side(v: Verdict, key: str, reported: list[dict[str, Any]], inside: list[tuple[float, float, float, str]],
               lo: float, hi: float, width: float, speed: float, table: dict[str, Any]) -> None:  # fmt: skip
    tolerance = float(table.get("cv_tolerance", 0.25))
    least = table.get("min_arrivals")
    for i, (w, (start, rate, cv, family)) in enumerate(zip(reported, inside, strict=False)):
        k = f"{key} / {start:g}"
        a, b = max(start, lo), min(start + width, hi)
        planned = (b - a) / speed
        f, synth = w.get("file") or {}, w.get("synthesised") or {}
        v.close(S, k, "file.rate", f.get("rate"), rate * speed, 0, False)
        v.exact(S, k, "file.cv", f.get("cv"), cv if rate > 0 else None)
        v.exact(S, k, "file.family", f.get("family"), family or None)
        covered = w.get("covered_s")
        last = i == len(reported) - 1
        if not last:
            v.close(S, k, "covered_s", covered, planned, 0, False)
        elif not isinstance(covered, int | float) or not 0 < covered <= planned + 1e-9:
            v.exact(S, k, "covered_s (within the window's part of the cut)", covered, planned)
        whole = isinstance(covered, int | float) and abs(covered - planned) <= 1e-9 * planned
        v.exact(
            S, k, "part", w.get("part"), "full" if whole and a == start and b == start + width else "part"
        )
        n = synth.get("arrivals")
        if whole:
            v.exact(S, k, "synthesised.arrivals", n, int(round(rate * round((b - a) * 1e6) / 1e6)))
        if isinstance(n, int) and isinstance(covered, int | float) and covered > 0:
            v.close(S, k, "synthesised.rate", synth.get("rate"), n / covered, 0, False)
            v.exact(S, k, "judged", w.get("judged"), n >= least if isinstance(least, int) else None)
            if w.get("judged") and rate > 0:
                s_cv = synth.get("cv")
                faithful = s_cv is not None and abs(s_cv / cv - 1.0) <= tolerance
                v.exact(S, k, "synthesis.faithful", (w.get("synthesis") or {}).get("faithful"), faithful)
                v.close(S, k, "synthesis.cv_ceiling", (w.get("synthesis") or {}).get("cv_ceiling"),
                        math.sqrt(n - 1), 0, False)  # fmt: skip


def _realised_side(v: Verdict, key: str, reported: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """The k-th scheduled send (by scheduled time, then send time) is the k-th synthesised arrival."""
    ordered = [r["t_send_ns"] for r in sorted(rows, key=lambda r: (r["t_sched_ns"], r["t_send_ns"]))]
    k = 0
    for w in reported:
        where = f"{key} / {w.get('start_s'):g}"
        n = (w.get("synthesised") or {}).get("arrivals")
        if not isinstance(n, int):
            v.exact(S, where, "synthesised.arrivals", n, "an integer")
            return
        mine = sorted(ordered[k : k + n])
        k += n
        got, covered = w.get("realised") or {}, w.get("covered_s")
        v.exact(S, where, "realised.arrivals", got.get("arrivals"), len(mine))
        if isinstance(covered, int | float) and covered > 0:
            v.close(S, where, "realised.rate", got.get("rate"), len(mine) / covered, 0, False)
        cv = cv_of(mine)
        if cv is None or got.get("cv") is None:
            v.exact(S, where, "realised.cv", got.get("cv"), cv)
        else:
            v.close(S, where, "realised.cv", got.get("cv"), cv, 1e-9, False)
