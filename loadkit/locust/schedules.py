"""The open-loop schedules and stages of one process's run: a component of Runtime
(``runtime.schedules``, locust/runtime.py), which configures it at each test start.

Every workload keeps one Dispatcher per target it sends to; the run's stage at a moment is
the load shape's step or the stage plan's, by elapsed time.
"""

from __future__ import annotations

import time
from types import MappingProxyType
from typing import Any

from loadkit.run.openloop import Dispatcher
from loadkit.run.stageplan import stage_at
from loadkit.run.workloads import SCENARIO_CLASS_FLAG, WARMUP, Workload
from loadkit.stats.runcontext import AskedFacts, AskedWorkload
from loadkit.stats.scheduletally import ScheduleTally


def _asked(scenario: Any, classes: list[type], sources: dict[str, Any]) -> AskedWorkload:
    arrival = getattr(scenario, "arrival", None)
    return AskedWorkload(tuple(c.__name__ for c in classes), dict(arrival) if arrival else None,
                         getattr(scenario, "trace", None), MappingProxyType(dict(sources)))  # fmt: skip


class Schedules:
    """The run's workloads with their schedules, the stage plan and the load shape's steps,
    and the clocks of the schedule (its start and, once the run stops, its end)."""

    def __init__(self, stats: Any = None) -> None:
        self.stats = stats  # this node's StatsCollector (None: the stats are not installed)
        self.workloads: dict[str, Workload] = {}
        self.plan: list[dict[str, Any]] = []
        self.staged = self.shaped = False
        self.stages_closed = True
        self.shape_steps: Any = None  # a locustfile's LoadTestShape, watched (local / master)
        self.shape_stage: str | None = None  # the shape's current step (locust/shapesteps.py)
        self.t_start_ns = 0
        self.schedule_end_ns: int | None = None
        self.run_time_s: float | None = None  # -t (or the scenario's duration), set at configure

    def arm(self) -> None:
        """A test start begins: the run's clock starts over and its end is not known yet."""
        self.t_start_ns = time.perf_counter_ns()
        self.schedule_end_ns = None

    def asked_facts(self, user_classes: list[type] | None, main_scenario: Any) -> AskedFacts:
        """What the run asks, for the delivered section (stats/runcontext.py): each workload's
        classes, arrival, trace and request sources, the main scenario's, the run's user classes."""
        return AskedFacts(
            tuple(_asked(w.scenario, w.classes, w.sources) for w in self.workloads.values()),
            _asked(main_scenario, [], {}) if main_scenario is not None else None,
            MappingProxyType(
                {c.__name__: bool(getattr(c, SCENARIO_CLASS_FLAG, False)) for c in user_classes or []}
            ),
        )

    def reshare(self, shares: dict[str, list[int] | None]) -> None:
        """Worker: the master's shares of each open-loop scenario, dealt among the workers that
        run its users (given before the schedules start; see locust/shares.py)."""
        for workload in self.workloads.values():
            if workload.label in shares and workload.dispatchers:
                share = shares[workload.label]
                workload.deal((int(share[0]), int(share[1])) if share else None)

    def _label(self, workload: Workload, target: str) -> str:
        """A (scenario, target) pair in reports: the target's name, prefixed when a run has several scenarios."""
        return target if len(self.workloads) == 1 else f"{workload.label}/{target}"

    @property
    def sources(self) -> dict[str, Any]:
        """Every workload's request source by (scenario-prefixed) target name."""
        return {self._label(w, t): s for w in self.workloads.values() for t, s in w.sources.items()}

    @property
    def dispatchers(self) -> dict[str, Dispatcher]:
        """Every open-loop schedule of this process, by (scenario-prefixed) target name."""
        return {self._label(w, t): d for w in self.workloads.values() for t, d in w.dispatchers.items()}

    def send_no_schedule(self) -> None:
        """The master sends nothing: its workers hold the schedules."""
        for workload in self.workloads.values():
            workload.dispatchers = {}

    def silence_schedules(self) -> None:
        """A worker that joined late: in open loop it sends nothing, so the asked rates stay exact."""
        for workload in self.workloads.values():
            workload.dispatchers = {name: Dispatcher(iter(()), None) for name in workload.dispatchers}

    def stage_now(self) -> str | None:
        """Closed loop: the stage this moment of the run belongs to: the load shape's current step
        (set by the master's shape, sent to the workers as a message: locust/shapesteps.py), else by
        elapsed time over the scenario's stages."""
        steps = self.shape_steps
        step = steps.current if steps is not None and self.shaped else self.shape_stage
        if step:
            return str(step)
        if not self.plan:
            return None
        return stage_at(self.plan, (time.perf_counter_ns() - self.t_start_ns) / 1e9) or self.plan[-1]["name"]

    def slot_stage(self, stage: str | None) -> str | None:
        """The stage of an open-loop slot; with a load shape, the shape's step (taken at send) instead."""
        return None if self.shaped else stage

    @property
    def sends_open_loop(self) -> bool:
        """A scenario of the run is open loop (true on a master too, which holds no schedule)."""
        return any((getattr(w.scenario, "arrival", None) or {}).get("model", "closed") != "closed"
                   for w in self.workloads.values())  # fmt: skip

    @property
    def open_loop(self) -> bool:
        return any(w.dispatchers for w in self.workloads.values())

    def start_schedule(self) -> None:
        """All users exist (spawning complete): the open-loop clock starts now, for every schedule."""
        now = time.perf_counter_ns()
        for dispatcher in self.dispatchers.values():
            dispatcher.start(now)

    def schedule_span_s(self) -> float | None:
        """How long the open-loop schedule ran: from its start to the run's stop (a trace cut
        by -t asks only the part it reached: stats/asked.py). A node holding no schedule (a
        distributed master) has the run time -t instead; None when neither is known."""
        starts = [d.t0_ns for d in self.dispatchers.values() if d.t0_ns is not None]
        if starts and self.schedule_end_ns is not None:
            return (self.schedule_end_ns - min(starts)) / 1e9
        if starts:
            return None  # still running, or ended by the schedule itself: nothing was cut
        return self.run_time_s

    def schedule_summary(self) -> dict[str, Any] | None:
        dispatchers = self.dispatchers
        if not dispatchers:
            return None
        return {name: d.summary() for name, d in dispatchers.items()}

    def schedule_tally(self) -> ScheduleTally | None:
        """This process's counts of every schedule it holds (None: it holds none), for the
        report's manifest: a distributed master sums its workers' (stats/scheduletally.py)."""
        dispatchers = self.dispatchers
        if not dispatchers:
            return None
        return ScheduleTally({name: d.tally() for name, d in dispatchers.items()}, nodes=1)

    def count_sent(self, request: Any = None) -> None:
        """A request about to be written: scheduled and sent (its record follows, any outcome).
        Warm-up requests are outside the measured run and outside its accounting."""
        if request is not None and request.stage == WARMUP:
            return
        if self.stats is not None:
            self.stats.add_scheduled(1)

    def count_dropped(self, stage: str | None = None) -> None:
        """An open-loop request dropped as too late: scheduled, never sent."""
        if self.stats is not None and stage != WARMUP:
            self.stats.add_scheduled(1)
            self.stats.add_dropped(1)

    def stopping(self) -> None:
        """The run is ending (Locust's test_stopping): slots due after now were never part of it."""
        if self.schedule_end_ns is None:
            self.schedule_end_ns = time.perf_counter_ns()

    def close_schedule(self) -> None:
        """At test stop: overdue slots no user took are dropped; the summary goes to the report."""
        now = self.schedule_end_ns or time.perf_counter_ns()
        for dispatcher in self.dispatchers.values():
            n = dispatcher.drop_overdue(now)
            if n and self.stats is not None:
                self.stats.add_scheduled(n)
                self.stats.add_dropped(n)
