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

from loadkit.arrival import Stage, arrival_offsets, stages_from_spec, worker_share
from loadkit.glue.backoff import Backoff, BackoffRules
from loadkit.glue.breaker import Breaker, BreakerRules, trip
from loadkit.glue.detection import AUTO_NAME, Detections
from loadkit.glue.openloop import Dispatcher
from loadkit.glue.requestshape import RequestOptionError, RequestShape, dropped_for
from loadkit.glue.shape import stage_at
from loadkit.plugins import plugin_fingerprint
from loadkit.records import RequestRecord
from loadkit.runoptions import configure_plugins, run_options
from loadkit.stagestats import stage_plan
from loadkit.targets import Target, TargetSpec, build_target, check_unique_names, parse_target
from loadkit.timer import Timeouts
from loadkit.tls import INSECURE_WARNING, TlsConfigError, TlsSettings
from loadkit.tls import use as use_tls

log = logging.getLogger("loadkit")

WARMUP = "warmup"
DEFAULT_SCENARIO = "uneven_chat"  # a shipped scenario (package data)


class ConfigError(Exception):
    """A run cannot start with these options; the message says why, in one line."""


def target_specs(options: Any, host: str | None, from_scenario: list[dict[str, Any]] | None = None) -> list[TargetSpec]:
    """Targets from --target/--targets; else --host; else the scenario's [[targets]]."""
    given = list(options.target or [])
    # The web UI form's --targets: one string, targets separated by spaces.
    given += (getattr(options, "targets", "") or "").split()
    specs = [parse_target(text, options.engine) for text in given]
    if not specs and not host and from_scenario:
        specs = [
            TargetSpec(t["name"], t["url"], t.get("engine") or "auto", t.get("api"), t.get("model"))
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
        self.sources: dict[str, Any] = {}
        self.scenario: Any = None
        self.timeouts = Timeouts()
        self.tls = TlsSettings()
        # What the pre-flight handshake of each https target negotiated (kept across configures).
        self.tls_negotiated: dict[str, dict[str, str | None]] = {}
        self.budget: int | None = None
        self.sent = 0
        self._assign = count()
        self.shard = (0, 1)
        self.dispatchers: dict[str, Dispatcher] = {}
        self.server_metrics: Any = None
        self.sessions: Any = None
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

    def configure(self, options: Any, host: str | None, shard: tuple[int, int]) -> None:
        self.scenario = load_scenario_file(options.scenario or DEFAULT_SCENARIO)
        shape = request_shape(options, self.scenario)
        specs = target_specs(options, host, getattr(self.scenario, "targets", None) or [])
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
        for target in self.targets:
            shape.apply(target, dropped_for(options, target.name))
        self.configure_failures(options, shard)
        try:
            self.timeouts = Timeouts(first_token_s=options.first_token_timeout, total_s=options.request_timeout)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--first-token-timeout / --request-timeout: {exc}") from None
        self.shard = shard
        if not options.max_requests and getattr(self.scenario, "max_requests", None):
            options.max_requests = int(self.scenario.max_requests)  # the command line wins
        index, total = shard
        self.sources = {
            t.name: self.scenario.request_source(worker_index=index, worker_count=total) for t in self.targets
        }
        self.budget = share_of(options.max_requests, index, total) if options.max_requests else None
        self.sent = 0
        self._assign = count()
        apply_scenario_slos(options, self.scenario)
        self.warmup_s = float(getattr(options, "warmup", 0) or 0)
        self.plan = stage_plan(dict(self.scenario.arrival or {"model": "closed"}), self.warmup_s)
        slo_limits = validate_slos(options)
        validate_failed_share(options)
        self.dispatchers = self._dispatchers(options)
        self.t_start_ns = time.perf_counter_ns()
        self.schedule_end_ns = None
        if self.sessions is not None:
            self.sessions.plan = self.plan
            self.sessions.set_slos(slo_limits)
            self.sessions.asked = getattr(self.scenario, "lengths_asked", None)

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
        """Closed loop: the stage this moment of the run belongs to (by elapsed time)."""
        if not self.plan:
            return None
        return stage_at(self.plan, (time.perf_counter_ns() - self.t_start_ns) / 1e9) or self.plan[-1]["name"]

    @property
    def open_loop(self) -> bool:
        return bool(self.dispatchers)

    def _dispatchers(self, options: Any) -> dict[str, Dispatcher]:
        """One schedule per target (each target gets the same arrival process)."""
        arrival = dict(self.scenario.arrival or {"model": "closed"})
        model = arrival.get("model", "closed")
        if model == "closed":
            return {}
        index, total = self.shard
        out = {}
        for target in self.targets:
            if model == "trace":
                source = self.sources[target.name]
                times = source.trace_arrival_times_s() or []
                # issue 27: a Mooncake window's cache warm-up requests come first, in the warmup stage
                names = getattr(source, "trace_arrival_stages", lambda: None)() or ["trace"] * len(times)
                offsets: Iterator[tuple[float, str]] = ((float(x), s) for x, s in zip(times, names, strict=True))
            else:
                stages = stages_from_spec(arrival)
                if self.warmup_s > 0:
                    first = stages[0]
                    stages = [Stage(self.warmup_s, first.rate, first.cv, None, WARMUP), *stages]
                offsets = worker_share(arrival_offsets(model, stages, int(self.scenario.seed)), index, total)
            out[target.name] = Dispatcher(
                offsets, options.max_schedule_lag or None, options.late_threshold_ms / 1e3
            )
        return out

    def start_schedule(self) -> None:
        """All users exist (spawning complete): the open-loop clock starts now, for every target."""
        now = time.perf_counter_ns()
        for dispatcher in self.dispatchers.values():
            dispatcher.start(now)

    def schedule_summary(self) -> dict[str, Any] | None:
        if not self.dispatchers:
            return None
        return {name: d.summary() for name, d in self.dispatchers.items()}

    def next_target(self) -> Target:
        """Round-robin targets over this process's users, so each target gets its share."""
        return self.targets[next(self._assign) % len(self.targets)]

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
        if self.sessions is not None and rec.stage is not None and self.plan:
            self.sessions.add_staged(rec)
        if rec.stage == WARMUP:
            return  # warm-up is excluded from the run's stats (it shows in the stage table)
        if self.sessions is not None:
            self.sessions.add_lengths(rec)
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


SCENARIO_SLOS = "loadkit_slos_from_scenario"


def apply_scenario_slos(options: Any, scenario: Any) -> None:
    """The scenario's SLOs count when no --slo was given (the command line wins). Written into
    the options, so the stats layer and, through the master, every worker see them; marked, so
    that a later run from the web UI with another scenario does not inherit them."""
    if getattr(options, SCENARIO_SLOS, False):
        options.slo = None
        setattr(options, SCENARIO_SLOS, False)
    slos = getattr(scenario, "slos", None) or {}
    if slos and not getattr(options, "slo", None):
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


def share_of(total: int, index: int, workers: int) -> int:
    """Split `total` over `workers` exactly: the first `total % workers` get one more."""
    return total // workers + (1 if index < total % workers else 0)


def load_scenario_file(path: str) -> Any:
    from loadkit.workload import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read scenario {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. a NUL byte in the path: not a file name at all
        raise ConfigError(f"cannot read scenario {path!r}: {exc}") from None


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
