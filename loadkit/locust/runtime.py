"""Per-process run state: targets, workload sources, stats, request budget.

Built at Locust's `init` (one per process) and configured once per test start (locust/starts.py
decides when): the start's configuration is built (run/runconfig.py ``build_run_config``, which
loads the scenarios), the targets detected and built from it, and the parts handed on. Its
components: ``schedules`` (locust/schedules.py: workloads, schedules, stages), ``starting``
(locust/starts.py: the start's coordination) and ``requests`` (the --max-requests budget).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import count
from typing import Any

from loadkit.client.adaptererr import forget_kinds
from loadkit.client.timer import Timeouts
from loadkit.client.tls import TlsSettings
from loadkit.locust import reachability
from loadkit.locust.breaker import Breaker, trip
from loadkit.locust.ending import ExhaustionWatch, end_run
from loadkit.locust.schedules import Schedules
from loadkit.locust.shapesteps import user_shape
from loadkit.locust.starts import StartState
from loadkit.plugins import plugin_fingerprint
from loadkit.plugins.guard import GuardedPluginManager, failure_of
from loadkit.records import RequestRecord
from loadkit.run.backoff import Backoff
from loadkit.run.detection import Detections
from loadkit.run.errors import ConfigError
from loadkit.run.runconfig import RunConfig, ScenarioFacts, StartPlan, build_run_config
from loadkit.run.runoptions import configure_plugins
from loadkit.run.setup import (
    apply_exact_output,
    configure_tls,
    target_specs,
    validate_failed_share,
    validate_slos,
    warn_once,
)
from loadkit.run.stageplan import MEASURED
from loadkit.run.tierrun import tier_context
from loadkit.run.workloads import (
    DEFAULT_SCENARIO,
    WARMUP,
    Workload,
    check_class_targets,
    check_image_targets,
    default_unused,
    load_scenario_file,
    load_workloads,
    main_workload,
    refuse_unserved_kinds,
    run_duration,
    run_slos,
    run_targets,
    share_of,
    staged_arrival,
)
from loadkit.servers.targets import Target, build_target, check_unique_names
from loadkit.stats.runcontext import RunContext
from loadkit.stats.stagestats import stage_plan

log = logging.getLogger("loadkit")


def _new_event() -> Any:
    import gevent.event

    return gevent.event.Event()


__all__ = [
    "DEFAULT_SCENARIO",
    "ConfigError",
    "ExhaustionWatch",
    "Runtime",
    "end_run",
    "load_scenario_file",
    "target_specs",
    "validate_failed_share",
    "validate_slos",
]


class RequestBudget:
    """--max-requests on this process: its share (None: no limit) and the requests counted."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self.sent = 0

    def take(self) -> bool:
        """Count one request; False once the share is spent."""
        if self.limit is not None and self.sent >= self.limit:
            return False
        self.sent += 1
        return True

    def give_back(self) -> None:
        """A counted request was not sent after all."""
        self.sent -= 1


class Runtime:
    """Everything one Locust process needs to send loadkit traffic."""

    def __init__(self, environment: Any, stats: Any = None, command_line: dict[str, Any] | None = None,
                 headless: bool = False) -> None:  # fmt: skip
        self.environment = environment
        self.stats = stats
        # The command line's values, taken at init before any web UI form changes the options
        # (precedence, run/runconfig.py snapshot); given by the listener that builds the runtime.
        self.command_line = dict(command_line or {})
        self.headless = headless  # a Locust process option: the web form cannot change it
        # This start's, built once by configure (after, only its launch facts: starts.take_launch).
        self.config = RunConfig()
        self.start_plan = StartPlan()  # what this start found and dealt (detections, pre-flight, shards)
        self.configured = 0  # how many times the scenarios were loaded and the targets probed
        # The options the configuration was prepared for, the master's message, the run's
        # report directory (locust/starts.py StartState).
        self.starting = StartState()
        # Set once this process's test start is done (configured, or refused): users that Locust
        # spawns before then (a worker whose config came after its spawn message) wait for it.
        self.ready = _new_event()
        self.targets: list[Target] = []
        # The workloads, their schedules, the stage plan and the load shape's steps.
        self.schedules = Schedules(stats)
        self.scenario: Any = None  # the main workload's scenario (see workloads.main_workload)
        # What the pre-flight handshake of each https target negotiated (kept across configures).
        self.tls_negotiated: dict[str, dict[str, str | None]] = {}
        self.requests = RequestBudget()  # --max-requests: this process's share, and what it sent
        self._assign: dict[Any, Iterator[int]] = {}
        self.shard = (0, 1)
        self.server_metrics: Any = None
        self.image_server: Any = None  # [images] transport = "url": this process's (locust/imageserver.py)
        self.sections: Any = None  # the stats' built-in sections (stats/builtin.py), given their context here
        self.stats_listeners: Any = None  # locust/statslisteners.py LocustStats, wired by locust/listeners.py
        self._plugin_errors: set[str] = set()
        self.watch = ExhaustionWatch(environment)
        self.breaker: Breaker | None = None
        # The run was stopped (circuit breaker, a start that failed): users send nothing more.
        self.halted = False
        # Targets that went away and came back: this node's view, and (local, master) the run's record.
        self.reachability = reachability.Reachability()
        self.reachability_record = reachability.Record()
        self.detections = Detections()
        # Why the last start from the web UI failed (shown there); None once a start succeeds.
        self.start_error: str | None = None
        # Test starts (loadkit's part) begun and done here: a web UI start waits for its own.
        self.starts_begun = self.starts_done = 0
        if stats is not None and hasattr(stats, "add_invalid_source"):
            stats.add_invalid_source(self.start_problems)

    def check_start(self, options: Any, host: str | None) -> str | None:
        """Why a run with ``options`` cannot start (one line), or None (run/startcheck.py)."""
        from loadkit.errors import UserError
        from loadkit.run.startcheck import check_start

        try:
            check_start(options, host)
        except UserError as exc:  # ConfigError, TargetError, PluginError ... (loadkit/errors.py)
            return str(exc)
        return None

    def start_problems(self) -> list[str]:
        return [f"the run could not start: {self.start_error}"] if self.start_error else []

    def workload_exhausted(self) -> None:
        self.watch.trigger()

    def user_classes(self) -> list[type] | None:
        """The run's user classes (None when the runtime runs without a Locust environment)."""
        classes = getattr(self.environment, "user_classes", None)
        return None if classes is None else list(classes)

    @property
    def timeouts(self) -> Timeouts:
        return self.config.timeouts

    @property
    def tls(self) -> TlsSettings:
        return self.config.tls

    def configure(self, options: Any, host: str | None, shard: tuple[int, int],
                  given: tuple[RunConfig, StartPlan] | None = None) -> RunConfig:  # fmt: skip
        """Load the scenarios, build this start's RunConfig (once), detect and build the targets.
        ``given``: a worker's decisions and start plan from the master (SLOs, detections, pre-flight)."""
        self.configured += 1
        schedules = self.schedules
        config = build_run_config(options, self.command_line, self._load_scenarios,
                                  given[0] if given is not None else None, self.fingerprint())  # fmt: skip
        self.config = config
        schedules.run_time_s = config.run_time_s
        self.start_plan = given[1].with_(shard=shard) if given is not None else StartPlan(shard=shard)
        # --exact-output overrides every scenario's own.
        for workload in schedules.workloads.values():
            apply_exact_output(config.request, workload.scenario)
        self._build_targets(host, config)
        self._start_image_server()
        if given is None:
            self.start_plan = self.start_plan.with_(detections=self.detections.to_option())
        self.configure_failures(shard)
        for target in self.targets:
            config.request.apply(target, self.start_plan.dropped_for(target.name))
        self.shard = shard
        self.requests.limit = share_of(config.max_requests, *shard) if config.max_requests else None
        self._configure_stages()
        for workload in schedules.workloads.values():
            self._configure_workload(workload)
        self.arm()
        if self.sections is not None:
            self.sections.configure(self.run_context(), config.slo_objects())
        return config

    def run_context(self) -> RunContext:
        """What the stats sections need of this run: a snapshot (stats/runcontext.py)."""
        tenants = list(getattr(self.scenario, "tenants", None) or [])
        schedules = self.schedules
        return RunContext.of(schedules.plan, schedules.staged, schedules.shaped, self._lengths_asked(), tenants,
                             schedules.asked_facts(self.user_classes(), self.scenario),
                             schedules.schedule_span_s()).with_(tiers=tier_context(self))  # fmt: skip

    def _tell_stats(self, **changes: Any) -> None:
        """The stats sections get a new snapshot of the run's context with ``changes``."""
        if self.sections is not None:
            self.sections.context = self.sections.context.with_(**changes)

    def schedule_started(self) -> None:
        """All users exist (spawning complete): the open-loop schedules start now."""
        self.schedules.start_schedule()
        self._tell_stats(covered_s=self.schedules.schedule_span_s())

    def schedule_stopping(self) -> None:
        """The run is ending (Locust's test_stopping): the schedule's end is known."""
        self.schedules.stopping()
        self._tell_stats(covered_s=self.schedules.schedule_span_s())

    def close_schedule(self) -> None:
        """At test stop: overdue slots are dropped; the stats get the schedule's span and, with a
        load shape, its steps as they ended."""
        self.schedules.close_schedule()
        self._tell_stats(covered_s=self.schedules.schedule_span_s(), plan=tuple(self.schedules.plan))

    def _shape_step(self, plan: list[dict[str, Any]]) -> None:
        """A load shape began a step (or started over): the stage table's plan grows."""
        self._tell_stats(plan=tuple(plan))

    def _load_scenarios(self, path: str) -> ScenarioFacts:
        """The run's workloads from --scenario ``path`` and the user classes; what they say
        that the configuration depends on."""
        schedules = self.schedules
        schedules.workloads = load_workloads(self.user_classes(), path)
        if path and default_unused(self.user_classes()):
            warn_once(f"loadkit: --scenario {path} is not used: no ScenarioUser class of this "
                      "locustfile leaves its scenario to it")  # fmt: skip
        main = main_workload(schedules.workloads, path)
        self.scenario = main.scenario if main is not None else None
        return self._scenario_facts()

    def _scenario_facts(self) -> ScenarioFacts:
        staged = (
            bool(staged_arrival(self.schedules.workloads.values(), None).get("stages"))
            or user_shape(self.environment) is not None
        )
        return ScenarioFacts(lambda: self.slos, self.duration_s, staged)

    def _build_targets(self, host: str | None, config: RunConfig) -> None:
        given = config.targets
        specs = target_specs(given, host, run_targets(self.schedules.workloads.values()))
        configure_tls(config.tls)
        self.detections.begin(self.start_plan.detections)
        for spec in specs:
            self.detections.resolve(spec, given.api_key, config.request.headers)
        check_unique_names(specs)  # again: detection named the --host target
        # issue 25: plugins read their own options (AdapterOptions.run_options, loadkit_configure).
        plugin_options = config.settings.plugin_options
        configure_plugins(plugin_options)
        self.targets = [build_target(s, given.api_key, given.model, plugin_options) for s in specs]
        check_class_targets(self.user_classes(), [t.name for t in self.targets])
        check_image_targets(self.schedules.workloads.values(), self.targets)
        refuse_unserved_kinds(self.schedules.workloads.values(), self.targets)

    def _start_image_server(self) -> None:
        """[images] transport = "url": the server the engines fetch from, on every process that
        sends (not a master: its workers serve their own)."""
        from loadkit.locust.imageserver import start_for, url_transport

        workloads = list(self.schedules.workloads.values())
        if self.image_server is None and not url_transport(workloads):
            return  # (the common case imports nothing more)
        from locust.runners import MasterRunner

        if isinstance(getattr(self.environment, "runner", None), MasterRunner):
            return
        self.image_server = start_for(workloads, self.targets, self.image_server)

    def stop_image_server(self) -> dict[str, int] | None:
        """At test stop: the server stops; what it served (None without one)."""
        from loadkit.workload.imageserve import STORE

        if self.image_server is None:
            return None
        self.image_server.stop()
        self.image_server = None
        return STORE.account()

    def arm(self) -> None:
        """A test start begins: counters and clocks of the run start over (cheap; no probing)."""
        self.requests.sent = 0
        self._assign = {}
        forget_kinds()  # the run's first adapter error of each kind keeps its traceback again
        self.schedules.arm()

    @property
    def slos(self) -> dict[str, float]:
        """The SLOs the run's scenarios give (used when no --slo is given)."""
        return run_slos(self.schedules.workloads.values())

    @property
    def duration_s(self) -> float | None:
        return run_duration(self.schedules.workloads.values())

    @property
    def warmup_s(self) -> float:
        return self.config.warmup_s

    def _configure_stages(self) -> None:
        """The run's stages: a locustfile's load shape's steps, else the scenarios' [arrival] stages."""
        shape = user_shape(self.environment)
        if shape is not None and self.warmup_s > 0:
            raise ConfigError(f"--warmup does not combine with the locustfile's load shape {type(shape).__name__}: "
                              "make the warm-up the shape's first step")  # fmt: skip
        schedules = self.schedules
        arrival = staged_arrival(
            schedules.workloads.values(), type(shape).__name__ if shape is not None else None
        )
        schedules.stages_closed = arrival.get("model", "closed") == "closed"
        steps = schedules.shape_steps
        if steps is not None:
            steps.on_plan = self._shape_step
        schedules.plan = (
            steps.plan if steps is not None and shape is not None else stage_plan(arrival, self.warmup_s)
        )
        if self.warmup_s > 0 and shape is None and not arrival.get("stages"):
            schedules.plan.append(self._measured_stage())
        schedules.shaped = shape is not None
        # A worker's records carry the master's shape step.
        schedules.staged = bool(schedules.plan) or schedules.shaped

    def _measured_stage(self) -> dict[str, Any]:
        """After a warm-up, a scenario without stages runs one measured stage: the rest of -t,
        else the scenario's duration_s, else until the run is stopped (duration None)."""
        run_time = self.config.run_time_s
        if run_time is not None and run_time <= self.warmup_s:
            raise ConfigError(f"--warmup {self.warmup_s:g} leaves nothing to measure in -t {run_time:g}s: "
                              "give a run time longer than the warm-up")  # fmt: skip
        rest = run_time - self.warmup_s if run_time is not None else self.duration_s
        return {"name": MEASURED, "level": None, "level_kind": "users", "duration_s": rest}

    def _configure_workload(self, workload: Workload) -> None:
        """Its sources (one per target its classes send to), its budget, its schedules."""
        workload.sent = 0
        workload.salt = self.config.salt
        workload.dispatchers = {}
        names = workload.target_names([t.name for t in self.targets])
        workload.plan_deal(names, self.config.schedule, bool(self.config.max_requests), self.warmup_s)
        workload.deal(self.shard)

    def _lengths_asked(self) -> Any:
        workloads = self.schedules.workloads
        if len(workloads) == 1:
            return getattr(self.scenario, "lengths_asked", None)
        return {
            "scenarios": {w.label: getattr(w.scenario, "lengths_asked", None) for w in workloads.values()}
        }

    def configure_failures(self, shard: tuple[int, int]) -> None:
        """The circuit breaker of this run, judging this node's share (see breaker.py)."""
        rules = self.config.failures.breaker
        self.breaker = Breaker(rules.for_share(*shard)) if rules is not None else None
        self.halted = False
        self.reachability = reachability.Reachability()
        self.reachability_record = reachability.Record()

    def new_backoff(self) -> Backoff | None:
        """A user's backoff state; None in open loop (the schedule is kept) or with --no-backoff."""
        rules = self.config.failures.retry.backoff
        if rules is None or self.schedules.open_loop:
            return None
        return Backoff(rules)

    def snapshot_realised(self) -> None:
        """The workload sources' own summaries (realised lengths, prefix sharing) for the report."""
        # issue 27: the trace loader's warnings (rows out of order, bad rows skipped) are the run's too
        sources = self.schedules.sources
        for note in dict.fromkeys(n for s in sources.values() for n in getattr(s, "load_notes", list)()):
            if self.stats is not None:
                self.stats.warn(note)
        if self.sections is None:
            return
        out = {}
        for name, source in sources.items():
            try:
                out[name] = source.realised()
            except Exception as exc:  # a summary is optional; its absence is stated
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        self.sections.realised = out

    def target_for(self, user_class: type | None = None) -> Target:
        """The target a new user sends to: the one its class names, else round-robin over the
        targets among the users of its class, so each target gets its share of every class."""
        name = getattr(user_class, "target", None) if user_class is not None else None
        if isinstance(name, str) and name:
            return next(t for t in self.targets if t.name == name)  # checked at configure
        turn = self._assign.setdefault(user_class, count())
        return self.targets[next(turn) % len(self.targets)]

    def next_target(self) -> Target:
        return self.target_for(None)

    def workload_for(self, user_class: type) -> Workload:
        """The workload a ScenarioUser class sends (the only one, when the runtime has no classes)."""
        workloads = self.schedules.workloads
        for workload in workloads.values():
            if user_class in workload.classes:
                return workload
        if len(workloads) == 1 and not next(iter(workloads.values())).classes:
            return next(iter(workloads.values()))
        raise RuntimeError(f"user class {user_class.__name__} is not one of this run's user classes")

    def take_budget(self) -> bool:
        """Count one request against --max-requests; False once this process's share is spent."""
        return self.requests.take()

    def record(self, rec: RequestRecord) -> None:
        from loadkit.plugins import get_plugin_manager

        if self.breaker is not None:
            reason = self.breaker.observe(rec)
            if reason is not None:
                trip(self.environment, self, reason)
        change = self.reachability.observe(rec)
        if change is not None:
            reachability.changed(self.environment, self, change)
        rec.worker = self.shard[0] if self.shard[1] > 1 else None
        if rec.stage == WARMUP:
            if self.stats is not None:
                self.stats.add_warmup(rec)  # outside the run's stats; the stage table shows it
            return
        pm = get_plugin_manager()
        if "loadkit_request_finished" in pm.implemented:
            self._notify_finished(pm, rec)
        if self.stats is not None:
            self.stats.add(rec)  # the engine stats and every registered section (stats/builtin.py)

    def retry_wait(self, rec: RequestRecord, backoff: Backoff | None = None) -> float:
        """Seconds to wait before this user's next request: Retry-After, when honoured, or the
        user's backoff after a fast failure (closed loop), whichever is longer."""
        return self.config.failures.retry.wait_s(rec, backoff)

    def _notify_finished(self, pm: GuardedPluginManager, rec: RequestRecord) -> None:
        """One pluggy call; a plugin that raised is named and the run marked invalid, and the
        record still counts (the guard keeps the other plugins running, see loadkit/plugins/guard.py)."""
        try:
            pm.hook.loadkit_request_finished(record=rec)
        except Exception as exc:  # only a hookwrapper's own failure gets here
            found = failure_of(exc)
            self.plugin_failed(found.plugin if found is not None else "unknown", exc)
        if pm.failures:
            for failure in pm.take_failures("loadkit_request_finished"):
                self.plugin_failed(failure.plugin, failure.exc)

    def plugin_failed(self, plugin: str, exc: BaseException) -> None:
        message = f"plugin {plugin!r} raised {exc!r} in loadkit_request_finished; run marked invalid"
        if message in self._plugin_errors:
            return
        self._plugin_errors.add(message)
        log.error("loadkit: %s", message)
        if self.stats is not None:
            self.stats.mark_invalid(message)

    def fingerprint(self) -> dict[str, str]:
        return plugin_fingerprint()
