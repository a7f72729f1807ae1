"""Per-process run state: targets, workload sources, stats, request budget.

Built at Locust's `init` (one per process) and configured at every `test_start`, because
workers only receive the master's options then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from itertools import count
from typing import Any

from loadkit.glue.backoff import Backoff, BackoffRules
from loadkit.glue.breaker import Breaker, BreakerRules, trip
from loadkit.glue.detection import AUTO_NAME, Detections
from loadkit.glue.errors import ConfigError
from loadkit.glue.openloop import Dispatcher
from loadkit.glue.requestshape import RequestOptionError, RequestShape, dropped_for
from loadkit.glue.shape import stage_at
from loadkit.glue.shapesteps import SHAPE_STAGE_OPTION, user_shape
from loadkit.glue.workloads import (
    DEFAULT_SCENARIO,
    WARMUP,
    Workload,
    check_class_targets,
    default_unused,
    load_scenario_file,
    load_workloads,
    main_workload,
    run_duration,
    run_slos,
    run_targets,
    share_of,
    staged_arrival,
)
from loadkit.plugins import plugin_fingerprint
from loadkit.records import RequestRecord
from loadkit.runoptions import configure_plugins, run_options
from loadkit.stagestats import stage_plan
from loadkit.targets import Target, TargetSpec, build_target, check_unique_names, parse_target
from loadkit.timer import Timeouts
from loadkit.tls import INSECURE_WARNING, TlsConfigError, TlsSettings
from loadkit.tls import use as use_tls

log = logging.getLogger("loadkit")

__all__ = ["DEFAULT_SCENARIO", "ConfigError", "Runtime", "load_scenario_file"]


def target_specs(options: Any, host: str | None, from_scenario: list[dict[str, Any]] | None = None) -> list[TargetSpec]:
    """Targets from --target/--targets; else --host; else the scenario's [[targets]]."""
    given = list(options.target or [])
    # The web UI form's --targets: one string, targets separated by spaces.
    given += (getattr(options, "targets", "") or "").split()
    specs = [parse_target(text, options.engine) for text in given]
    if not specs and not host and from_scenario:
        specs = [
            TargetSpec(t["name"], t["url"], t.get("engine") or "auto", t.get("api"), t.get("model"),
                       t.get("priority_as"))
            for t in from_scenario
        ]
    if not specs:
        if not host:
            raise ConfigError("no target: give --host URL, --target NAME=URL, or [[targets]] in the scenario")
        # With --engine auto the target is named after what detection finds (glue/detection.py).
        name = options.engine if options.engine != "auto" else AUTO_NAME
        specs = [TargetSpec(name, host, options.engine, options.api or None, options.model or None)]
    check_unique_names(specs)
    return specs


_insecure_warned: list[bool] = []


def configure_tls(options: Any) -> TlsSettings:
    """The run's TLS options become this process's client context (loadkit/tls.py), before any
    target is probed or built. --insecure is said loudly: on the console here (once per
    process), and in the report's manifest and warnings (glue/manifest.py)."""
    settings = TlsSettings.from_options(options)
    try:
        use_tls(settings)
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None
    if settings.insecure and not _insecure_warned:
        _insecure_warned.append(True)
        log.warning("loadkit: WARNING: %s", INSECURE_WARNING)
    return settings


class Runtime:
    """Everything one Locust process needs to send loadkit traffic."""

    def __init__(self, environment: Any, stats: Any = None) -> None:
        self.environment = environment
        self.stats = stats
        self.targets: list[Target] = []
        self.workloads: dict[str, Workload] = {}
        self.scenario: Any = None  # the main workload's scenario (see workloads.main_workload)
        self.timeouts = Timeouts()
        self.tls = TlsSettings()
        # What the pre-flight handshake of each https target negotiated (kept across configures).
        self.tls_negotiated: dict[str, dict[str, str | None]] = {}
        self.budget: int | None = None
        self.sent = 0
        self._assign: dict[Any, Iterator[int]] = {}
        self.shard = (0, 1)
        self.server_metrics: Any = None
        self.sessions: Any = None
        self.shape_steps: Any = None  # a locustfile's LoadTestShape, watched (local / master)
        self.plan: list[dict[str, Any]] = []
        self.staged = self.shaped = False
        self.stages_closed = True
        self.schedule_end_ns: int | None = None
        self._plugin_errors: set[str] = set()
        self.watch = ExhaustionWatch(environment)
        self.breaker: Breaker | None = None
        self.backoff_rules: BackoffRules | None = None
        # The run was stopped (circuit breaker, a start that failed): users send nothing more.
        self.halted = False
        self.detections = Detections()
        # Why the last start from the web UI failed (shown there); None once a start succeeds.
        self.start_error: str | None = None
        if stats is not None and hasattr(stats, "add_invalid_source"):
            stats.add_invalid_source(self.start_problems)

    def check_start(self, options: Any, host: str | None) -> str | None:
        """Why a run with ``options`` cannot start (one line), or None (glue/startcheck.py)."""
        from loadkit.cli import UserError
        from loadkit.glue.startcheck import check_start
        from loadkit.plugins import PluginError
        from loadkit.targets import TargetError

        try:
            check_start(options, host)
        except (ConfigError, TargetError, PluginError, UserError) as exc:
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

    def configure(self, options: Any, host: str | None, shard: tuple[int, int]) -> None:
        self.workloads = load_workloads(self.user_classes(), options.scenario)
        if options.scenario and default_unused(self.user_classes()):
            warn_once(f"loadkit: --scenario {options.scenario} is not used: no ScenarioUser class of this "
                      "locustfile leaves its scenario to it")  # fmt: skip
        main = main_workload(self.workloads, options.scenario)
        self.scenario = main.scenario if main is not None else None
        # --extra-body / --header / --exact-output; --exact-output overrides every scenario's own.
        shape = request_shape(options, None)
        for workload in self.workloads.values():
            request_shape(options, workload.scenario)
        specs = target_specs(options, host, run_targets(self.workloads.values()))
        self.tls = configure_tls(options)
        self.detections.begin(options)
        for spec in specs:
            self.detections.resolve(spec, options.api_key or None, shape.headers)
        check_unique_names(specs)  # again: detection named the --host target
        # issue 25: plugins read their own options (AdapterOptions.run_options, loadkit_configure).
        plugin_options = run_options(options)
        configure_plugins(plugin_options)
        self.targets = [build_target(s, options.api_key or None, options.model or None, plugin_options)
                        for s in specs]
        check_class_targets(self.user_classes(), [t.name for t in self.targets])
        for target in self.targets:
            shape.apply(target, dropped_for(options, target.name))
        self.configure_failures(options, shard)
        try:
            self.timeouts = Timeouts(first_token_s=options.first_token_timeout, total_s=options.request_timeout)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--first-token-timeout / --request-timeout: {exc}") from None
        self.shard = shard
        self.budget = share_of(options.max_requests, *shard) if options.max_requests else None
        self.sent = 0
        self._assign = {}
        apply_scenario_slos(options, self)
        self.warmup_s = float(getattr(options, "warmup", 0) or 0)
        self._configure_stages()
        slo_limits = validate_slos(options)
        validate_failed_share(options)
        for workload in self.workloads.values():
            self._configure_workload(workload, options)
        self.t_start_ns = time.perf_counter_ns()
        self.schedule_end_ns = None
        if self.sessions is not None:
            self.sessions.plan = self.plan
            self.sessions.set_slos(slo_limits)
            self.sessions.asked = self._lengths_asked()

    @property
    def slos(self) -> dict[str, float]:
        """The SLOs the run's scenarios give (used when no --slo is given)."""
        return run_slos(self.workloads.values())

    @property
    def duration_s(self) -> float | None:
        return run_duration(self.workloads.values())

    def _configure_stages(self) -> None:
        """The run's stages: a locustfile's load shape's steps, else the scenarios' [arrival] stages."""
        shape = user_shape(self.environment)
        if shape is not None and self.warmup_s > 0:
            raise ConfigError(f"--warmup does not combine with the locustfile's load shape {type(shape).__name__}: "
                              "make the warm-up the shape's first step")  # fmt: skip
        arrival = staged_arrival(self.workloads.values(), type(shape).__name__ if shape is not None else None)
        self.stages_closed = arrival.get("model", "closed") == "closed"
        steps = self.shape_steps
        self.plan = steps.plan if steps is not None and shape is not None else stage_plan(arrival, self.warmup_s)
        self.shaped = shape is not None
        self.staged = bool(self.plan) or self.shaped  # a worker's records carry the master's shape step

    def _configure_workload(self, workload: Workload, options: Any) -> None:
        """Its sources (one per target its classes send to), its budget, its schedules."""
        workload.sent = 0
        workload.dispatchers = {}
        workload.plan_deal(workload.target_names([t.name for t in self.targets]), options, self.warmup_s)
        workload.deal(self.shard)

    def reshare(self, shares: dict[str, list[int] | None]) -> None:
        """Worker: the master's shares of each open-loop scenario, dealt among the workers that
        run its users (given before the schedules start; see glue/shares.py)."""
        for workload in self.workloads.values():
            if workload.label in shares and workload.dispatchers:
                share = shares[workload.label]
                workload.deal((int(share[0]), int(share[1])) if share else None)

    def _lengths_asked(self) -> Any:
        if len(self.workloads) == 1:
            return getattr(self.scenario, "lengths_asked", None)
        return {"scenarios": {w.label: getattr(w.scenario, "lengths_asked", None) for w in self.workloads.values()}}

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

    def configure_failures(self, options: Any, shard: tuple[int, int]) -> None:
        """The circuit breaker and the closed-loop backoff of this run (see breaker.py, backoff.py)."""
        try:
            rules = BreakerRules.parse(getattr(options, "breaker", None))
            self.backoff_rules = BackoffRules.from_options(options)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.breaker = Breaker(rules.for_share(*shard)) if rules is not None else None
        self.halted = False

    def new_backoff(self) -> Backoff | None:
        """A user's backoff state; None in open loop (the schedule is kept) or with --no-backoff."""
        if self.backoff_rules is None or self.open_loop:
            return None
        return Backoff(self.backoff_rules)

    def snapshot_realised(self) -> None:
        """The workload sources' own summaries (realised lengths, prefix sharing) for the report."""
        # issue 27: the trace loader's warnings (rows out of order, bad rows skipped) are the run's too
        for note in dict.fromkeys(n for s in self.sources.values() for n in getattr(s, "load_notes", list)()):
            if self.stats is not None:
                self.stats.warn(note)
        if self.sessions is None:
            return
        out = {}
        for name, source in self.sources.items():
            try:
                out[name] = source.realised()
            except Exception as exc:  # a summary is optional; its absence is stated
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        self.sessions.realised = out

    def stage_now(self) -> str | None:
        """Closed loop: the stage this moment of the run belongs to: the load shape's current step
        (set by the master's shape, read from the options every spawn message brings), else by
        elapsed time over the scenario's stages."""
        step = getattr(getattr(self.environment, "parsed_options", None), SHAPE_STAGE_OPTION, None)
        if step:
            return str(step)
        if not self.plan:
            return None
        return stage_at(self.plan, (time.perf_counter_ns() - self.t_start_ns) / 1e9) or self.plan[-1]["name"]

    def slot_stage(self, stage: str | None) -> str | None:
        """The stage of an open-loop slot; with a load shape, the shape's step (taken at send) instead."""
        return None if self.shaped else stage

    @property
    def open_loop(self) -> bool:
        return any(w.dispatchers for w in self.workloads.values())

    def start_schedule(self) -> None:
        """All users exist (spawning complete): the open-loop clock starts now, for every schedule."""
        now = time.perf_counter_ns()
        for dispatcher in self.dispatchers.values():
            dispatcher.start(now)

    def schedule_summary(self) -> dict[str, Any] | None:
        dispatchers = self.dispatchers
        if not dispatchers:
            return None
        return {name: d.summary() for name, d in dispatchers.items()}

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
        for workload in self.workloads.values():
            if user_class in workload.classes:
                return workload
        if len(self.workloads) == 1 and not next(iter(self.workloads.values())).classes:
            return next(iter(self.workloads.values()))
        raise RuntimeError(f"user class {user_class.__name__} is not one of this run's user classes")

    def take_budget(self) -> bool:
        """Count one request against --max-requests; False once this process's share is spent."""
        if self.budget is not None and self.sent >= self.budget:
            return False
        self.sent += 1
        return True

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

    def record(self, rec: RequestRecord) -> None:
        from loadkit.plugins import get_plugin_manager

        if self.breaker is not None:
            reason = self.breaker.observe(rec)
            if reason is not None:
                trip(self.environment, self, reason)
        rec.worker = self.shard[0] if self.shard[1] > 1 else None
        if self.sessions is not None and rec.stage is not None and self.staged:
            self.sessions.add_staged(rec)
        if rec.stage == WARMUP:
            return  # warm-up is excluded from the run's stats (it shows in the stage table)
        if self.sessions is not None:
            self.sessions.add_lengths(rec)
            self.sessions.add_class(rec)
        # Called one implementation at a time so a failure names its plugin.
        for impl in get_plugin_manager().hook.loadkit_request_finished.get_hookimpls():
            try:
                impl.function(record=rec)
            except Exception as exc:  # a plugin must not lose the record, but the run is invalid
                self.plugin_failed(impl.plugin_name, exc)
        if self.stats is not None:
            self.stats.add(rec)
        if self.sessions is not None and rec.turn is not None:
            self.sessions.add_turn(rec)

    def retry_wait(self, rec: RequestRecord, backoff: Backoff | None = None) -> float:
        """Seconds to wait before this user's next request: Retry-After, when honoured, or the
        user's backoff after a fast failure (closed loop), whichever is longer."""
        options = getattr(self.environment, "parsed_options", None)
        wait = backoff.after(rec) if backoff is not None else 0.0
        if rec.retry_after_s is None or not getattr(options, "honor_retry_after", False):
            return wait
        return max(wait, min(rec.retry_after_s, float(getattr(options, "max_retry_after", 30.0))))

    def plugin_failed(self, plugin: str, exc: Exception) -> None:
        message = f"plugin {plugin!r} raised {exc!r} in loadkit_request_finished; run marked invalid"
        if message in self._plugin_errors:
            return
        self._plugin_errors.add(message)
        log.error("loadkit: %s", message)
        if self.stats is not None:
            self.stats.mark_invalid(message)

    def fingerprint(self) -> dict[str, str]:
        return plugin_fingerprint()


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """Log a warning once per process (configure runs several times at start)."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning(message)


SCENARIO_SLOS = "loadkit_slos_from_scenario"


def apply_scenario_slos(options: Any, scenario: Any) -> None:
    """The scenario's SLOs count when no --slo was given (the command line wins). Written into
    the options, so the stats layer and, through the master, every worker see them; marked, so
    that a later run from the web UI with another scenario does not inherit them."""
    if getattr(options, SCENARIO_SLOS, False):
        options.slo = None
        setattr(options, SCENARIO_SLOS, False)
    if getattr(options, "slo", None):
        return
    slos = getattr(scenario, "slos", None) or {}
    if slos:
        options.slo = [f"{key}={float(limit):g}" for key, limit in slos.items()]
        setattr(options, SCENARIO_SLOS, True)


def request_shape(options: Any, scenario: Any) -> RequestShape:
    """--extra-body / --header / --exact-output, parsed; --exact-output overrides the scenario's
    [prompt] exact_output (the scenario is loaded afresh for every run)."""
    try:
        shape = RequestShape.from_options(options)
    except RequestOptionError as exc:
        raise ConfigError(str(exc)) from None
    prompt = getattr(scenario, "prompt", None)
    if shape.exact_output is not None and prompt is not None:
        prompt.exact_output = shape.exact_output
    return shape


def validate_slos(options: Any) -> dict[str, float]:
    """SLOs typed into the web UI's form skip argparse: check them here, one clear error.
    Returns {metric: limit ms} (the last value given for a key wins, as in the stats layer)."""
    import argparse

    from loadkit.stats.options import parse_slo_item

    given = getattr(options, "slo", None) or []
    if isinstance(given, str):
        given = [given]
        options.slo = given
    limits: dict[str, float] = {}
    for item in given:
        try:
            limits.update((slo.key, slo.limit_ms) for slo in parse_slo_item(str(item)))
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(str(exc)) from None
    return limits


def validate_failed_share(options: Any) -> None:
    """--max-failed-share typed into the web UI's form skips argparse: one clear error."""
    from loadkit.stats.options import failed_share_limit

    try:
        failed_share_limit(options)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class ExhaustionWatch:
    """When the workload or --max-requests is used up, end the run once in-flight work is done.

    Local: quit (headless) or stop (web UI). Worker: tell the master, which ends the run when
    every worker has said so.
    """

    DONE_MESSAGE = "loadkit_worker_done"

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.greenlet: Any = None

    def trigger(self) -> None:
        import gevent

        if self.greenlet is None or self.greenlet.dead:
            self.greenlet = gevent.spawn(self._finish_when_idle)

    def _finish_when_idle(self) -> None:
        import gevent
        from locust.runners import WorkerRunner

        runner = self.environment.runner
        while runner.user_count > 0:
            gevent.sleep(0.05)
        if isinstance(runner, WorkerRunner):
            runner.send_message(self.DONE_MESSAGE, {"worker": runner.worker_index})
            return
        end_run(self.environment, "workload finished")


def end_run(environment: Any, why: str) -> None:
    import gevent

    log.info("loadkit: %s; ending the run", why)
    options = environment.parsed_options
    runner = environment.runner
    if options is not None and getattr(options, "headless", False):
        gevent.spawn(runner.quit)
    else:
        gevent.spawn(runner.stop)
