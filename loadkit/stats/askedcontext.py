"""The asked context of one target: which arrival process its sending user classes follow.

Built from the run's asked facts (stats/runcontext.py ``AskedFacts``, a snapshot the run set-up
hands over at configure) when the delivered section is reported; how long the schedule ran is
passed in. A ScenarioUser class follows its own scenario's [arrival] (two classes on two
targets are each judged by their own, issue 31); a class whose tasks are the user's own
(an LLMUser subclass) paces itself, which loadkit cannot know: "not asked". Classes with
different processes on one target superpose: "not asked" either, naming them. A trace's
asked offsets leave out cache warm-up requests (warmcache.py: not part of the window) and are
cut to the time the run's schedule covered (stats/asked.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadkit.stats.asked import SCHEDULED
from loadkit.workload.servegen import read_windows
from loadkit.workload.warmcache import WARMUP_STAGE

if TYPE_CHECKING:  # runcontext.py calls this module: the types only, no import cycle
    from loadkit.stats.runcontext import AskedFacts, AskedWorkload


def asked_context(asked: AskedFacts | None, target: str, classes: list[str],
                  covered_s: float | None = None) -> dict[str, Any]:  # fmt: skip
    """What ``classes`` asked of ``target`` (see stats/asked.py for the context's keys);
    ``covered_s``: how long the run's schedule ran (None: not cut)."""
    if asked is None:
        return {"arrival": {"model": "closed"}}
    workloads = list(asked.workloads)
    classless = next(
        (w for w in workloads if not w.classes), None
    )  # the workload of a run without a locustfile's classes
    if not classes:
        return _workload_context(asked, classless or (workloads[0] if workloads else None), target, covered_s)
    known = asked.class_sends_scenario
    found: dict[int, AskedWorkload] = {}
    own: list[str] = []
    for name in classes:
        workload = next((w for w in workloads if name in w.classes), None)
        if workload is None and classless is not None and (name not in known or known[name]):
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
    return _workload_context(asked, next(iter(found.values())), target, covered_s)


def _workload_context(asked: AskedFacts, workload: AskedWorkload | None, target: str,
                      covered_s: float | None) -> dict[str, Any]:  # fmt: skip
    facts = workload if workload is not None else asked.main
    arrival = dict((facts.arrival if facts is not None else None) or {"model": "closed"})
    context: dict[str, Any] = {"arrival": arrival}
    if arrival.get("model") not in SCHEDULED:
        return context
    sources = workload.sources if workload is not None else {}
    source = sources.get(target) or next(iter(sources.values()), None)
    if source is None:
        return context
    times = source.trace_arrival_times_s() or []
    stages = getattr(source, "trace_arrival_stages", lambda: None)() or []
    if stages:
        times = [t for t, s in zip(times, stages, strict=True) if s != WARMUP_STAGE]
    context["offsets"] = times
    if covered_s is not None:
        context["covered_s"] = covered_s
    spec = facts.trace if facts is not None else None
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
