"""The asked context of one target: which arrival process its sending user classes follow.

Built from the runtime (duck-typed: stats/ does not import loadkit/locust/) when the delivered section
is reported. A ScenarioUser class follows its own scenario's [arrival] (two classes on two
targets are each judged by their own, issue 31); a class whose tasks are the user's own
(an LLMUser subclass) paces itself, which loadkit cannot know: "not asked". Classes with
different processes on one target superpose: "not asked" either, naming them. A trace's
asked offsets leave out cache warm-up requests (warmcache.py: not part of the window) and are
cut to the time the run's schedule covered (stats/asked.py).
"""

from __future__ import annotations

from typing import Any

from loadkit.stats.asked import SCHEDULED
from loadkit.workload.servegen import read_windows
from loadkit.workload.warmcache import WARMUP_STAGE


def asked_context(runtime: Any, target: str, classes: list[str]) -> dict[str, Any]:
    """What ``classes`` asked of ``target`` (see stats/asked.py for the context's keys)."""
    if runtime is None:
        return {"arrival": {"model": "closed"}}
    workloads = list((getattr(runtime, "workloads", None) or {}).values())
    classless = next(
        (w for w in workloads if not w.classes), None
    )  # the runtime without a locustfile's classes
    if not classes:
        return _workload_context(runtime, classless or (workloads[0] if workloads else None), target)
    known = (
        {c.__name__: c for c in (runtime.user_classes() or [])} if hasattr(runtime, "user_classes") else {}
    )
    found: dict[int, Any] = {}
    own: list[str] = []
    for name in classes:
        workload = next((w for w in workloads if any(c.__name__ == name for c in w.classes)), None)
        if workload is None and classless is not None and (name not in known or _sends_scenario(known[name])):
            workload = classless
        if workload is None:
            own.append(name)
        else:
            found[id(workload)] = workload
    if own and not found:
        return {"not_asked": f"user class {', '.join(own)} paces its own tasks (wait_time, its own calls)"}
    if own or len(found) > 1:
        return {"not_asked": f"user classes {', '.join(classes)} with different arrival processes share "
                             "this target (their arrivals superpose)"}  # fmt: skip
    return _workload_context(runtime, next(iter(found.values())), target)


def _sends_scenario(cls: type) -> bool:
    return bool(getattr(cls, "loadkit_sends_scenario", False))  # run/workloads.py SCENARIO_CLASS_FLAG


def _workload_context(runtime: Any, workload: Any, target: str) -> dict[str, Any]:
    scenario = (
        getattr(workload, "scenario", None) if workload is not None else getattr(runtime, "scenario", None)
    )
    arrival = dict(getattr(scenario, "arrival", None) or {"model": "closed"})
    context: dict[str, Any] = {"arrival": arrival}
    if arrival.get("model") not in SCHEDULED:
        return context
    sources = getattr(workload, "sources", None) or {}
    source = sources.get(target) or next(iter(sources.values()), None)
    if source is None:
        return context
    times = source.trace_arrival_times_s() or []
    stages = getattr(source, "trace_arrival_stages", lambda: None)() or []
    if stages:
        times = [t for t, s in zip(times, stages, strict=True) if s != WARMUP_STAGE]
    context["offsets"] = times
    covered = getattr(runtime, "schedule_span_s", lambda: None)()
    if covered is not None:
        context["covered_s"] = covered
    spec = getattr(scenario, "trace", None)
    if getattr(spec, "format", None) == "servegen":
        context["servegen"] = servegen_context(spec)
    return context


def servegen_context(spec: Any) -> dict[str, Any]:
    """A ServeGen replay's file windows in its cut (stats/servegenwindows.py judges them)."""
    win = read_windows(str(spec.path))
    lo = float(win.start[0]) if spec.start_s is None else float(spec.start_s)
    hi = float(win.start[-1]) + win.width_s if spec.end_s is None else float(spec.end_s)
    rows = [
        {"start_s": float(s), "rate": float(r), "cv": float(c), "family": f}
        for s, r, c, f in zip(win.start, win.rate, win.cv, win.family, strict=True)
        if s + win.width_s > lo and s < hi
    ]
    return {"path": str(spec.path), "from_s": lo, "to_s": hi, "speed": float(spec.speed),
            "width_s": win.width_s, "windows": rows}  # fmt: skip
