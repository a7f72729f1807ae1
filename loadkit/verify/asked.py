"""The delivered section's "asked" side, recomputed: per (target, stage), from the raw log (which
user classes sent there), the manifest (each class's kind and scenario, each scenario's
[arrival], a load shape's steps, the schedule's counts) and, for a trace replay, the scenario
file and the trace file read here (verify/trace.py). docs/reports.md ("Delivered load") and
docs/load-models.md define it:

- each target is judged by the arrival process of the classes that sent to it: one scenario
  class, its own scenario's [arrival]; requests of no class, the run's scenario;
- a class that paces its own tasks (an LLMUser, a plain Locust user) was "not asked", with a
  reason; so were several classes of different processes superposed on one target;
- closed loop: "users N", N the load shape's step level when the locustfile has a shape, or
  the stage's own users in a closed stage plan (``stage_kind`` "constant users"), else the
  scenario's [arrival] users; never a rate;
- an open-loop process keeps its own rate and CV in every shape step (``users`` says the
  step's level); a stage plan asks each stage's own rate (a ramp: no rate, ``ramp`` [from, to]);
- a trace asks the arrivals of the part the run reached: its first N offsets, N the slots the
  schedule had reached (sent + dropped), or with ``covered_s`` (when that is not the whole
  trace) those at or before it, which may be up to one per user more (a user holds its next
  slot before it is due; one the stop ends before it sends is neither sent nor dropped).
"""

from __future__ import annotations

import math
from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.rawlog import Run
from loadkit.verify.trace import TraceUnread, scenario_table, trace_offsets

NOT_ASKED = "not asked"
SCHED_TOLERANCE_S = 1e-6  # a slot's time is its offset in whole ns: far below a µs from it
Scenario = dict[str, Any]


def check_asked(
    run: Run, v: Verdict, by_target: dict[str, Any], mine: dict[tuple[Any, ...], list[Any]]
) -> dict[str, list[float] | str]:
    """Check each row's asked side; per row key (``target / stage``) of a trace, the part of the
    trace asked (its offsets), or why it is not known."""
    s = "delivered"
    parts: dict[str, list[float] | str] = {}
    for (engine, stage), rows in sorted(mine.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        name = "run" if stage is None else stage
        row = ((by_target.get(engine) or {}).get("stages") or {}).get(name)
        if row is None:
            continue
        key = f"{engine} / {name}"
        classes = sorted({r["user_class"] for r in rows if r.get("user_class")})
        if "user_classes" in row:
            v.exact(s, key, "user_classes", row["user_classes"], classes)
        if run.report.get("tenants"):
            v.notes.append(
                f"delivered {key} asked because it is the tenants' own schedule (checked in the tenants section)"
            )
            continue
        source = sending_scenario(run, classes)
        asked = row.get("asked") or {}
        if isinstance(source, str):
            v.exact(s, key, "asked (not asked: the pacing is the classes' own)",
                    {k: asked.get(k) for k in ("model", "rate", "cv")} | {"reason": bool(asked.get("reason"))},
                    {"model": NOT_ASKED, "rate": None, "cv": None, "reason": True})  # fmt: skip
            continue
        arrival = dict((source or {}).get("arrival") or {"model": "closed"})
        model = arrival.get("model", "closed")
        if model == "trace":
            parts[key] = _trace(run, v, key, engine, source or {}, asked, rows)
            continue
        if model == "tenants":
            v.notes.append(
                f"delivered {key} asked because it is the tenants' own schedule (checked in the tenants section)"
            )
            continue
        want = process_asked(arrival, name, step_users(run).get(name))
        got = {k: asked.get(k) for k in want}
        v.exact(s, key, f"asked ({_said(want)})", got, want)
    return parts


def sending_scenario(run: Run, classes: list[str]) -> Scenario | str | None:
    """The scenario whose [arrival] the sending classes follow (None: no scenario, closed
    loop), or why none is asked (a str)."""
    m = run.manifest
    declared = m.get("user_classes") or {}
    own: list[str] = []
    found: dict[str, Scenario | None] = {}
    if not classes:
        return m.get("scenario")
    for name in classes:
        entry = declared.get(name)
        if entry is not None and entry.get("kind") != "scenario":
            own.append(name)
            continue
        label = (entry or {}).get("scenario")
        found[str(label)] = _scenario_by_label(run, label)
    if own and not found:
        return f"user class {', '.join(own)} paces its own tasks"
    if own or len(found) > 1:
        return f"user classes {', '.join(classes)} with different arrival processes share this target"
    return next(iter(found.values()))


def _scenario_by_label(run: Run, label: Any) -> Scenario | None:
    """A class's scenario: the manifest's ``scenarios`` entry of its label when the run sent
    several, else the run's scenario (a class sending ``--scenario``, or the only one)."""
    listed = run.manifest.get("scenarios") or []
    if label is not None:
        for entry in listed:
            if entry.get("label") == label:
                return dict(entry)
    return run.manifest.get("scenario")


def step_users(run: Run) -> dict[str, int]:
    """A locustfile's load shape: each step's user count (manifest.shape)."""
    steps = (run.manifest.get("shape") or {}).get("steps") or []
    return {str(st["name"]): int(st["level"]) for st in steps if st.get("level_kind") == "users"}


def process_asked(arrival: dict[str, Any], stage: str, users: int | None) -> dict[str, Any]:
    """What a closed loop or a generated open-loop process asks of ``stage``."""
    model = arrival.get("model", "closed")
    if model == "closed" and users is None:  # a closed stage plan: each stage its own users
        for i, st in enumerate(arrival.get("stages") or []):
            if str(st.get("name") or f"stage{i + 1}") == stage and st.get("users") is not None:
                users = int(st["users"])
    if model == "closed":
        out: dict[str, Any] = {"model": "closed", "rate": None, "cv": None,
                               "users": users if users is not None else arrival.get("users")}  # fmt: skip
        out["stage_kind"] = "constant users" if users is not None else None
        return out
    default_cv = float(arrival.get("cv", 1.0))
    stages = arrival.get("stages") or [{"rate": arrival.get("rate"), "name": "main"}]
    named = [dict(st, name=st.get("name") or f"stage{i + 1}") for i, st in enumerate(stages)]
    # One process for the whole run (no plan, or a one-stage plan): every stage asks it.
    found = named[0] if len(named) == 1 else next((st for st in named if st["name"] == stage), None)
    if found is None:
        return {"model": model, "rate": None, "cv": None}
    cv = {"constant": 0.0, "poisson": 1.0}.get(model, float(found.get("cv", default_cv)))
    out = {"model": model, "rate": float(found["rate"]), "cv": cv, "ramp": None, "users": users}
    if found.get("ramp_to") is not None:
        out.update(rate=None, ramp=[float(found["rate"]), float(found["ramp_to"])])
    return out


def _trace(run: Run, v: Verdict, key: str, engine: str, scenario: Scenario, asked: dict[str, Any],
           rows: list[dict[str, Any]]) -> list[float] | str:  # fmt: skip
    """Check a trace row's asked side; the part of the trace asked, or why it is not known."""
    s = "delivered"
    try:
        offsets = trace_offsets(
            str(scenario.get("path")), scenario_table(scenario.get("path"), scenario.get("sha256"))
        )
    except (TraceUnread, OSError) as exc:
        v.notes.append(f"delivered {key} asked (a trace's part) because {exc}")
        return str(exc)
    schedule = _schedule(run, engine)
    if schedule is None:
        why = f"the manifest has no schedule counts for {engine} (a distributed master has them only once every worker sent its final counts)"
        v.notes.append(f"delivered {key} asked (a trace's part) because {why}")
        return why
    reached = min(int(schedule.get("scheduled", 0)), len(offsets))
    v.exact(s, key, "asked.model", asked.get("model"), "trace")
    covered = asked.get("covered_s")
    asked_n = reached
    if reached >= len(offsets):
        v.exact(s, key, "asked.covered_s (the whole trace was reached)", covered, None)
    elif not isinstance(covered, int | float):
        v.exact(s, key, "asked.covered_s (the run reached part of the trace)", covered, "a number")
    else:
        # The slots due before the stop: each sent or dropped, but for one a user may hold when
        # the stop ends it before it sends (neither sent nor dropped): at most one per user.
        asked_n = sum(1 for t in offsets if t <= covered)
        users = int(run.manifest.get("users") or 0)
        figure = (
            f"the trace's arrivals up to asked.covered_s (sent + dropped, + at most {users} held at the stop)"
        )
        if reached <= asked_n <= reached + users:
            v.exact(s, key, figure, asked_n, asked_n)
        else:
            v.exact(s, key, figure, asked_n, reached)
        if asked_n > reached:
            v.remarks.append(f"delivered {key}: {asked_n - reached} of the trace's arrivals due before the stop were "
                             "neither sent nor dropped (taken by a user the stop ended before it sent)")  # fmt: skip
    rate, cv = _rate_cv(offsets[:asked_n])
    for figure, mine in (("asked.rate (the reached part of the trace)", rate),
                         ("asked.cv (the reached part of the trace)", cv)):  # fmt: skip
        got = asked.get("rate" if "rate" in figure else "cv")
        if mine is None or got is None:
            v.exact(s, key, figure, got, mine)
        else:
            v.close(s, key, figure, got, mine, 0.0, False)
    part = offsets[:reached]
    _sched_times(run, v, key, part, rows, int(schedule.get("dropped", 0)))
    return offsets[:asked_n]


def _sched_times(
    run: Run, v: Verdict, key: str, part: list[float], rows: list[dict[str, Any]], dropped: int
) -> None:
    """One process, nothing dropped: the sends' scheduled times are the trace's offsets."""
    sched = sorted(r["t_sched_ns"] for r in rows if r.get("t_sched_ns") is not None)
    if dropped or len({r.get("worker") for r in rows}) > 1 or len(sched) != len(part) or not sched:
        return
    worst = max(abs((t - sched[0]) / 1e9 - (o - part[0])) for t, o in zip(sched, part, strict=True))
    v.close("delivered", key, "t_sched_ns against the trace's offsets: largest deviation (s)", worst, 0.0,
            SCHED_TOLERANCE_S, False)  # fmt: skip


def _schedule(run: Run, engine: str) -> dict[str, Any] | None:
    """The open-loop schedule's counts for ``engine`` (keyed by target, or label/target)."""
    schedule = run.manifest.get("schedule") or {}
    found = [s for k, s in schedule.items() if k == engine or str(k).endswith("/" + engine)]
    return found[0] if len(found) == 1 else None


def _rate_cv(offsets: list[float]) -> tuple[float | None, float | None]:
    """Rate ((n − 1) / span) and CV (sample sd of the gaps over their mean); None below three."""
    if len(offsets) < 3:
        return None, None
    ordered = sorted(offsets)
    span = ordered[-1] - ordered[0]
    gaps = [b - a for a, b in zip(ordered, ordered[1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1))
    return ((len(offsets) - 1) / span if span > 0 else None), (sd / mean if mean > 0 else None)


def _said(want: dict[str, Any]) -> str:
    if want["model"] == "closed":
        return f"closed loop at {want['users']} users" + (" per stage" if want.get("stage_kind") else "")
    if want.get("ramp"):
        return f"a {want['model']} ramp"
    return f"{want['model']} {want['rate']}/s" + (
        ", in a shape's step" if want.get("users") is not None else ""
    )
