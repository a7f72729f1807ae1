"""The run's scenarios: which user class sends which scenario, and what they say about the run.

A ScenarioUser class names its scenario (``scenario = "agent-multiturn"``, a shipped name or a
path) or leaves it to ``--scenario`` (the built-in uneven chat when that is empty too). Each
scenario file of the run is one Workload: its requests and sessions per target, its open-loop
schedule per target, its share of ``max_requests``. Classes naming the same file share it (they
split its stream; they do not each send it in full). A run without a locustfile's classes (the
runtime driven on its own) has the one ``--scenario`` workload, so that case is not special.

Run-wide settings are merged over the run's scenarios: [slos] and [[targets]] must not
disagree, ``duration_s`` is the longest, and at most one set of [arrival] stages can drive
the run; a conflict stops the run with an error naming both scenarios.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadkit.core.kinds import CHAT
from loadkit.run.errors import ConfigError
from loadkit.run.openloop import Dispatcher
from loadkit.run.settings import ScheduleRules
from loadkit.stats.stagestats import stage_plan
from loadkit.workload.arrival import Stage, arrival_offsets, stages_from_spec, worker_share
from loadkit.workload.shipped import UnknownScenario, resolve_scenario

DEFAULT_SCENARIO = "uneven_chat"  # a shipped scenario (package data)
WARMUP = "warmup"
# Set on ScenarioUser: classes carrying it send a scenario (the runtime loads it for them).
SCENARIO_CLASS_FLAG = "loadkit_sends_scenario"


@dataclass(eq=False)
class Workload:
    """One scenario file's traffic in this process."""

    key: str  # the scenario file's absolute path
    scenario: Any
    classes: list[type] = field(default_factory=list)
    label: str = ""  # how reports name it when a run has several (the scenario's name)
    sources: dict[str, Any] = field(default_factory=dict)  # target name → RequestSource
    dispatchers: dict[str, Dispatcher] = field(default_factory=dict)  # target name → schedule
    budget: int | None = None  # this process's share of the scenario's max_requests
    sent: int = 0
    salt: int = 0  # the run's prompt salt (RunConfig.salt): the same on every node of a run
    _names: list[str] = field(default_factory=list)
    _warmup_s: float = 0.0
    _lag_s: float | None = None
    _late_s: float = 0.01
    _limit: int | None = None

    @property
    def name(self) -> str:
        return str(getattr(self.scenario, "name", "") or Path(self.key).stem)

    def target_names(self, names: list[str]) -> list[str]:
        """The targets its classes send to: the ones they name, every target if one names none."""
        wanted = {getattr(c, "target", None) or None for c in self.classes}
        if not self.classes or None in wanted:
            return list(names)
        return [n for n in names if n in wanted]

    def plan_deal(self, names: list[str], schedule: ScheduleRules, max_requests_given: bool,
                  warmup_s: float) -> None:  # fmt: skip
        """What ``deal`` needs besides the share: the targets, the schedule's rules, the warm-up."""
        self._names, self._warmup_s = names, warmup_s
        self._lag_s, self._late_s = schedule.max_lag_s, schedule.late_threshold_ms / 1e3
        # The command line wins: with --max-requests the scenario's own count is not a budget.
        self._limit = None if max_requests_given else getattr(self.scenario, "max_requests", None)

    def deal(self, shard: tuple[int, int] | None) -> None:
        """This process's share (index, count) of the scenario: its items, its budget and (open
        loop) its slice of every target's schedule; None: none of it (its schedules stay empty).
        A schedule not yet started is dealt again in place, so users waiting on it keep it."""
        index, total = shard or (0, 1)
        self.sources = {n: self.scenario.request_source(worker_index=index, worker_count=total, salt=self.salt)
                        for n in self._names}  # fmt: skip
        self.budget = share_of(int(self._limit), index, total) if self._limit else None
        for name, source in self.sources.items():
            offsets = schedule_offsets(self.scenario, source, (index, total), self._warmup_s)
            if offsets is None:
                continue
            offsets = offsets if shard is not None else iter(())
            held = self.dispatchers.get(name)
            if held is not None and not held.started:
                held.deal(offsets)
            else:
                self.dispatchers[name] = Dispatcher(offsets, self._lag_s, self._late_s)

    def take_budget(self) -> bool:
        """One request against the scenario's max_requests; False once this process's share is spent."""
        if self.budget is not None and self.sent >= self.budget:
            return False
        self.sent += 1
        return True

    def give_back(self) -> None:
        self.sent -= 1


def scenario_classes(user_classes: Iterable[type] | None) -> list[type] | None:
    if user_classes is None:
        return None
    return [c for c in user_classes if getattr(c, SCENARIO_CLASS_FLAG, False)]


def default_unused(user_classes: Iterable[type] | None) -> bool:
    """True when the run's classes are known and none leaves its scenario to --scenario."""
    classes = scenario_classes(user_classes)
    return classes is not None and all(getattr(c, "scenario", None) for c in classes)


def class_dir(cls: type) -> Path | None:
    """The directory of the module defining ``cls`` (a locustfile): relative scenario paths may start there."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return Path(path).resolve().parent if path else None


def load_scenario_file(path: str, who: str = "") -> Any:
    from loadkit.workload import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise ConfigError(f"{who}{exc}") from None
    except OSError as exc:
        raise ConfigError(f"{who}cannot read scenario {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. a NUL byte in the path: not a file name at all
        raise ConfigError(f"{who}cannot read scenario {path!r}: {exc}") from None


def _locate(ref: str, cls: type | None, who: str) -> Path:
    try:
        return resolve_scenario(ref, class_dir(cls) if cls is not None else None)
    except UnknownScenario as exc:
        raise ConfigError(f"{who}{exc}") from None


def load_workloads(user_classes: Iterable[type] | None, default_ref: str) -> dict[str, Workload]:
    """One Workload per scenario file the run's ScenarioUser classes send; ``user_classes``
    None (no locustfile): the one ``default_ref`` (``--scenario``) workload."""
    classes = scenario_classes(user_classes)
    out: dict[str, Workload] = {}
    for cls in [None] if classes is None else classes:
        own = getattr(cls, "scenario", None) if cls is not None else None
        who = f"user class {cls.__name__}: " if own and cls is not None else ""
        path = _locate(own or default_ref or str(DEFAULT_SCENARIO), cls if own else None, who)
        key = os.path.abspath(str(path))
        if key not in out:
            out[key] = Workload(key, load_scenario_file(str(path), who))
        if cls is not None:
            out[key].classes.append(cls)
    _label(out.values())
    return out


def _label(workloads: Iterable[Workload]) -> None:
    """Label each workload by its scenario's name; by its path where two share a name."""
    items = list(workloads)
    names = [w.name for w in items]
    for w in items:
        w.label = w.name if names.count(w.name) == 1 else w.key


def main_workload(workloads: dict[str, Workload], default_ref: str) -> Workload | None:
    """The workload of ``--scenario`` (or the built-in default) when the run sends it, else the first."""
    if not workloads:
        return None
    try:
        default = os.path.abspath(str(resolve_scenario(default_ref or str(DEFAULT_SCENARIO))))
    except UnknownScenario:
        default = ""
    return workloads.get(default) or next(iter(workloads.values()))


def run_slos(workloads: Iterable[Workload]) -> dict[str, float]:
    """Every SLO the run's scenarios give; two scenarios giving one metric different limits is an error."""
    out: dict[str, tuple[float, str]] = {}
    for w in workloads:
        for key, limit in (getattr(w.scenario, "slos", None) or {}).items():
            held = out.setdefault(key, (float(limit), w.label))
            if held[0] != float(limit):
                raise ConfigError(
                    f"scenarios {held[1]!r} and {w.label!r} give different SLOs for {key} ({held[0]:g} vs "
                    f"{float(limit):g} ms): give --slo {key}=MS for the run, or make the scenarios agree"
                )
    return {key: limit for key, (limit, _) in out.items()}


def run_targets(workloads: Iterable[Workload]) -> list[dict[str, Any]]:
    """The [[targets]] of the run's scenarios; one name defined two ways is an error."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for w in workloads:
        for target in getattr(w.scenario, "targets", None) or []:
            held = out.setdefault(target["name"], (target, w.label))
            if held[0] != target:
                raise ConfigError(f"scenarios {held[1]!r} and {w.label!r} define target {target['name']!r} "
                                  "differently: rename one, or give the targets with --target")  # fmt: skip
    return [t for t, _ in out.values()]


def run_duration(workloads: Iterable[Workload]) -> float | None:
    """The longest ``duration_s`` among the run's scenarios (None when none gives one)."""
    durations = [float(d) for w in workloads if (d := getattr(w.scenario, "duration_s", None))]
    return max(durations) if durations else None


def staged_arrival(workloads: Iterable[Workload], shape: str | None) -> dict[str, Any]:
    """The [arrival] table whose stages drive the run (closed, no stages, when none has any).
    Two scenarios with different stages, or stages beside the locustfile's load shape ``shape``,
    cannot both drive one run."""
    staged = [w for w in workloads if (getattr(w.scenario, "arrival", None) or {}).get("stages")]
    if staged and shape:
        raise ConfigError(
            f"the locustfile's load shape {shape} sets the users over time, and scenario {staged[0].label!r} has "
            "[arrival] stages of its own: remove the stages (the shape's steps become the report's stages) "
            "or the shape"
        )
    first = dict(staged[0].scenario.arrival) if staged else {"model": "closed"}
    for w in staged[1:]:
        if stage_plan(dict(w.scenario.arrival)) != stage_plan(first):
            raise ConfigError(f"scenarios {staged[0].label!r} and {w.label!r} both have [arrival] stages, and "
                              "they differ: one run follows one set of stages")  # fmt: skip
    return first


def check_class_targets(user_classes: Iterable[type] | None, names: list[str]) -> None:
    """Every target a user class names must be one of the run's targets."""
    for cls in user_classes or []:
        wanted = getattr(cls, "target", None)
        if getattr(cls, "loadkit_user", False) and isinstance(wanted, str) and wanted and wanted not in names:
            raise ConfigError(f"user class {cls.__name__}: target {wanted!r} is not one of this run's targets "
                              f"({', '.join(names)}); name them with --target NAME=URL")  # fmt: skip


def check_image_targets(workloads: Iterable[Workload], targets: Iterable[Any]) -> None:
    """A scenario with [images] needs targets whose adapter sends images on its api (the
    adapter's ``image_apis``, docs/engines.md "Images"): refused at start, not per request."""
    with_images = [w.label for w in workloads if getattr(w.scenario, "images", None) is not None
                   or _multimodal_trace(w.scenario)]  # fmt: skip
    if not with_images:
        return
    for t in targets:
        adapter = t.adapter
        if adapter.api not in getattr(adapter, "image_apis", ()):
            takes = ", ".join(getattr(adapter, "image_apis", ())) or "none"
            raise ConfigError(f"target {t.name!r}: engine {adapter.name!r} (api {adapter.api!r}) takes no images "
                              f"(scenario {with_images[0]!r} sends images; apis with images: {takes})")  # fmt: skip


def _multimodal_trace(scenario: Any) -> bool:
    """A ServeGen trace whose dataset gives images (workload/servegenmm.py): it sends images
    without an [images] table."""
    trace = getattr(scenario, "trace", None)
    if trace is None or trace.format != "servegen":
        return False
    from loadkit.workload.servegen import dataset_for, read_lengths

    return read_lengths(str(dataset_for(trace.path))).images is not None


def workload_kinds(workload: Any) -> set[str]:
    """The request kinds a workload sends: its own ``kinds()`` where it has one, else its
    scenario's (``kinds()``, or the ``kind`` of each of its ``parts``); chat when it names none."""
    for owner in (workload, getattr(workload, "scenario", None)):
        kinds = getattr(owner, "kinds", None)
        if callable(kinds):
            return set(kinds()) or {CHAT}
    found = set()
    for part in getattr(getattr(workload, "scenario", None), "parts", None) or ():
        kind = part.get("kind") if isinstance(part, dict) else getattr(part, "kind", None)
        found.add(kind or CHAT)
    return found or {CHAT}


def refuse_unserved_kinds(workloads: Iterable[Any], targets: Iterable[Any]) -> None:
    """Every kind a workload sends (embeddings, rerank, a plugin's) must be served by every
    target's adapter (``EngineAdapter.serves``, its ``kind_paths``; docs/engines.md "Which engine
    serves what"): refused at start with the target, the engine and the kind, not per request."""
    wanted: dict[str, str] = {}  # kind -> the first workload that sends it
    for w in workloads:
        for kind in sorted(workload_kinds(w)):
            wanted.setdefault(kind, getattr(w, "label", "") or getattr(w, "name", "") or "?")
    for t in targets:
        adapter = t.adapter
        for kind, label in wanted.items():
            if not adapter.serves(kind):
                serves = ", ".join([CHAT, *sorted(getattr(adapter, "kind_paths", {}))])
                raise ConfigError(f"target {t.name!r}: engine {adapter.name!r} does not serve {kind} requests "
                                  f"(scenario {label!r} sends them; {adapter.name} serves: {serves})")  # fmt: skip


def share_of(total: int, index: int, workers: int) -> int:
    """Split `total` over `workers` exactly: the first `total % workers` get one more."""
    return total // workers + (1 if index < total % workers else 0)


def schedule_offsets(scenario: Any, source: Any, shard: tuple[int, int],
                     warmup_s: float) -> Iterator[tuple[float, str]] | None:  # fmt: skip
    """This shard's (offset s, stage) send times of an open-loop scenario (None: closed loop).
    Every target gets the same arrival process; a warm-up runs at the first stage's rate."""
    arrival = dict(scenario.arrival or {"model": "closed"})
    model = arrival.get("model", "closed")
    if model == "closed":
        return None
    if model in ("trace", "tenants"):  # the source's items are this shard's already, with their times
        times = source.trace_arrival_times_s() or []
        # issue 27: a Mooncake window's cache warm-up requests come first, in the warmup stage
        names = getattr(source, "trace_arrival_stages", lambda: None)() or ["trace"] * len(times)
        return ((float(x), s) for x, s in zip(times, names, strict=True))
    stages = stages_from_spec(arrival)
    if warmup_s > 0:
        first = stages[0]
        stages = [Stage(warmup_s, first.rate, first.cv, None, WARMUP), *stages]
    return worker_share(arrival_offsets(model, stages, int(scenario.seed)), *shard)
