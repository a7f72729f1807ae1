"""Locust event listeners that wire loadkit into a run; `register(events)` is called by the
locustfile (the one place where import-time registration is how Locust works)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from loadkit.errors import UserError
from loadkit.locust import breaker, reachability, starts
from loadkit.locust import gpuhooks as gpu
from loadkit.locust.breaker import on_user_error
from loadkit.locust.cooperative import install_gevent_yield
from loadkit.locust.ending import stop_a_refused_start, worker_done_handler
from loadkit.locust.handover import handed_options
from loadkit.locust.runtime import ConfigError, ExhaustionWatch, Runtime, end_run
from loadkit.locust.scraping import ServerMetrics
from loadkit.locust.shape import StageShape
from loadkit.locust.shapesteps import install_worker as install_shape_steps
from loadkit.locust.shapesteps import watch_shape
from loadkit.locust.statslisteners import LocustStats, options_of
from loadkit.run import preflight
from loadkit.run.manifest import run_manifest
from loadkit.run.openloop import behind_warning
from loadkit.run.options import add_arguments
from loadkit.run.runconfig import snapshot
from loadkit.run.settings import launch_facts
from loadkit.stats.builtin import BuiltinSections

log = logging.getLogger("loadkit")
NOTE_MESSAGE = "loadkit_worker_note"
REFUSED_MESSAGE = "loadkit_worker_refused"


def _install_stats(environment: Any, options: Any) -> LocustStats:
    """This node's stats, wired: the listeners here tell them when a start begins and ends."""
    return LocustStats(environment, options_of(options), wired=True)


def on_init(environment: Any, **_: Any) -> None:
    from locust.runners import MasterRunner, WorkerRunner

    if getattr(environment, "loadkit", None) is not None:
        return  # already set up (a worker can get its first spawn before `init` fires)

    install_gevent_yield()  # the stats' live reports give the hub its turns (stats/turns.py)
    options = handed_options(environment)  # Locust hands the options over here and at test start
    stats = _install_stats(environment, options)
    runtime = Runtime(environment, stats=stats.collector, command_line=snapshot(options),
                      headless=bool(getattr(options, "headless", False)))  # fmt: skip
    runtime.stats_listeners = stats
    stats.runtime = runtime
    environment.loadkit = runtime
    # Locust fires `quitting` in reverse order, so this runs before the stats layer's handler.
    environment.events.quitting.add_listener(_stop_before_quitting)
    _route_sigint()
    if runtime.stats is not None:
        runtime.sections = BuiltinSections(runtime.stats, runtime.run_context())
        runtime.sections.install()  # every built-in section subscribes here, once
        from loadkit.locust.taskerrors import install as install_task_errors

        install_task_errors(environment, runtime)  # exceptions in the users' own tasks
    from loadkit.locust.selfcheck import install as install_selfcheck

    # Every node that sends traffic watches its own event-loop lag and CPU (skips the master).
    install_selfcheck(environment, runtime.stats)
    from loadkit.locust.locustmem import install as install_trim

    install_trim(environment)
    from loadkit.locust.stalls import install as install_stall_guards

    # Known loop stalls (full GC, Locust's first inspect.stack()) merged events: see stalls.py.
    install_stall_guards(environment)
    from loadkit.locust.shares import install as install_shares

    # Before the schedules start: the master deals open-loop shares by who runs which users.
    install_shares(environment, runtime)
    # spawning_complete carries no environment: bind this process's runtime here.
    environment.events.spawning_complete.add_listener(lambda **_: runtime.schedule_started())
    environment.events.test_stopping.add_listener(lambda **_: runtime.schedule_stopping())
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        starts.install_worker(environment, runtime)
        install_shape_steps(environment, runtime)
    if isinstance(runner, MasterRunner):
        starts.install_master(environment, runtime)
        runner.register_message(ExhaustionWatch.DONE_MESSAGE, worker_done_handler())
        environment.events.spawning_complete.add_listener(
            lambda **_: stop_a_refused_start(environment, runtime)
        )
        runner.register_message(NOTE_MESSAGE, _master_notes_handler(runtime))
        runner.register_message(REFUSED_MESSAGE, _master_notes_handler(runtime))
        breaker.install(environment, runtime)
        reachability.install(environment, runtime)
    if not isinstance(runner, WorkerRunner):
        _watch_shapes(environment)
        _check_options_early(environment, options)
        _install_shape(environment, options)
        starts.spawn_open_loop_at_once(environment, runtime)
        from loadkit.webui import install_web_ui

        install_web_ui(environment, runtime)
        _warn_open_web_ui(environment, options)


def _watch_shapes(environment: Any) -> None:
    """The locustfile's load shapes (the web UI may pick another one) report their steps as stages."""
    for shape in (getattr(environment, "available_shape_classes", None) or {}).values():
        watch_shape(environment, shape)
    environment.loadkit.schedules.shape_steps = watch_shape(environment)


def _warn_open_web_ui(environment: Any, options: Any) -> None:
    """A web UI reachable from other machines without a login lets anyone start load."""
    if environment.web_ui is None or options is None or getattr(options, "web_login", False):
        return
    host = launch_facts(options).web_host
    if host in ("", "*", "0.0.0.0", "::") or not (host.startswith("127.") or host in ("localhost", "::1")):
        log.warning(
            "loadkit: the web UI listens on %s without authentication: anyone who can reach it can start "
            "load. Use --web-host 127.0.0.1, or --web-login.",
            host or "all interfaces",
        )


def _install_shape(environment: Any, options: Any) -> None:
    """Stages (or a warm-up) drive the user count through a load shape; none: -u/-t as usual."""
    runtime: Runtime = environment.loadkit
    try:
        starts.prepare(runtime, options, environment.host, (0, 1))
    except UserError:
        return  # the web UI may still fix the options; test_start reports the error
    schedules = runtime.schedules
    if schedules.plan and environment.shape_class is None:
        environment.shape_class = StageShape(
            schedules.plan,
            closed=schedules.stages_closed,
            config=lambda: runtime.config,
            # Locust starts the shape (and ticks it once) before test_start: -u as the web form
            # or a headless run's defaults set it becomes the configuration's launch facts now.
            on_start=lambda: starts.take_launch(runtime, handed_options(environment)),
        )
        environment.shape_class.runner = environment.runner


_SIGINT_ROUTED: list[bool] = []


def _route_sigint() -> None:
    """Ctrl-C reaches Locust's main greenlet as KeyboardInterrupt, as Locust expects, but
    from a greenlet of its own: left to Python, the signal lands in whatever runs at that
    moment, often a hub callback reading a stream (client/hubreads.py), and gevent prints a
    traceback for it before passing it on. Once per process, from the main thread."""
    import signal
    import threading

    import gevent

    if _SIGINT_ROUTED or threading.current_thread() is not threading.main_thread():
        return
    _SIGINT_ROUTED.append(True)
    hub = gevent.get_hub()
    gevent.signal_handler(signal.SIGINT, lambda: hub.parent.throw(KeyboardInterrupt()))


def _stop_before_quitting(environment: Any, **_: Any) -> None:
    """On Ctrl-C / SIGTERM Locust fires `quitting` while users still stream. Stop them first:
    their in-flight requests become `cancelled` records before any report is written."""
    from locust.runners import STATE_INIT, STATE_STOPPED

    runner = environment.runner
    if runner is None:
        return
    if runner.state not in (STATE_INIT, STATE_STOPPED):
        runner.stop()


def _check_options_early(environment: Any, options: Any) -> None:
    """Fail a headless run before it starts: one line on stderr, exit code 2, no traceback."""
    if options is None or not (getattr(options, "headless", False) or getattr(options, "autostart", False)):
        return
    try:
        runtime: Runtime = environment.loadkit
        config = starts.prepare(runtime, options, environment.host, (0, 1))
        if not config.checks.skip_reachability_check:
            check_reachable(runtime)
        preflight.before_headless_start(runtime)
    except UserError as exc:
        print(f"loadkit: error: {exc}", file=sys.stderr)
        sys.exit(2)


def check_reachable(runtime: Runtime) -> None:
    """Every target accepts connections; https targets also complete a TLS handshake, so a
    certificate problem is one clear error before the run, not a run of tls_error requests."""
    import socket

    from loadkit.client.tls import TlsError
    from loadkit.client.tlsstream import check_tls

    for target in runtime.targets:
        ep = target.endpoint
        try:
            if ep.ssl_context is None:
                socket.create_connection((ep.host, ep.port), timeout=5).close()
            else:
                runtime.tls_negotiated[target.name] = check_tls(ep, timeout_s=5.0)
        except TlsError as exc:
            raise ConfigError(f"target {target.name!r} at {target.spec.url}: TLS: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"target {target.name!r} at {target.spec.url} is unreachable: {exc}") from None


def on_test_start(environment: Any, **_: Any) -> None:
    from locust.runners import WorkerRunner

    runner = environment.runner
    options = handed_options(environment)
    if runner is None:
        # A worker that connects while a run is going gets its first spawn message while its
        # runner is still being built (Locust's connect handshake yields): nothing can be set
        # up yet. Once the runner exists, set up and fire test_start again for loadkit's
        # listeners (the first firing did nothing for them).
        import gevent

        gevent.spawn(_start_when_runner_exists, environment)
        return
    if getattr(environment, "loadkit", None) is None:
        on_init(environment)  # the spawn came before Locust fired `init`; on_init is idempotent
    runtime: Runtime = environment.loadkit
    if not isinstance(runner, WorkerRunner):
        runtime.schedules.shape_steps = watch_shape(environment)
    runtime.start_error = None
    if isinstance(runner, WorkerRunner):
        runtime.starting.report_dir = None  # until this start's config from the master names it
    # The second half of a worker's start whose config came late (ask_for_config): its stats
    # began with the first half and wait for runtime.ready.
    resumed = isinstance(runner, WorkerRunner) and runtime.starting.asked_config
    if isinstance(runner, WorkerRunner) and starts.ask_for_config(environment, runtime, on_test_start):
        runtime.ready.clear()  # its users wait until the config has come and this start is done
        _begin_stats(runtime, options, configured=False)
        return
    runtime.starts_begun += 1
    configured = False
    try:
        configured = _start(environment, runtime, runner, options)
    finally:
        if not resumed:
            _begin_stats(runtime, options, configured)
        runtime.starts_done += 1  # a web UI start's reply waits for this (webui/startform.py)


def _begin_stats(runtime: Runtime, options: Any, configured: bool) -> None:
    """The stats' test start, after loadkit's: this start's StatsOptions (SLOs resolved once,
    in the RunConfig); a start that failed before its config was built gets the options' own."""
    if runtime.stats_listeners is None:
        return
    slos = runtime.config.slo_objects() if runtime.configured else None
    runtime.stats_listeners.begin(runtime.config.stats if configured else options_of(options, slos))


def _start(environment: Any, runtime: Runtime, runner: Any, options: Any) -> bool:
    """loadkit's part of a test start; True when this start's RunConfig was built."""
    from locust.runners import MasterRunner, WorkerRunner

    try:
        if not isinstance(runner, WorkerRunner):
            starts.claim_report_dir(runtime, str(getattr(options, "report_dir", "") or ""))
        if isinstance(runner, MasterRunner):
            _prepare_master(environment, runtime, options)
        elif isinstance(runner, WorkerRunner):
            _prepare_worker(environment, runtime, options)
        else:
            starts.begin(runtime, options, environment.host, (0, 1))
        if not isinstance(runner, WorkerRunner):
            preflight.at_test_start(runtime)
            gpu.resolve_sources(runtime)  # a GPU source that cannot be used refuses the start
        if isinstance(runner, MasterRunner):
            starts.send_to_workers(environment, runtime)  # before Locust's spawn messages
    except starts.StartRefused as exc:  # worker: a spawn of a start the master refused
        log.info("loadkit: the master refused this start (%s); sending nothing", exc)
        runtime.halted = True
        runtime.ready.set()
        runtime.watch.trigger()  # "done" once its users stopped: the master ends the run
        return False
    except UserError as exc:
        log.error("loadkit: error: %s", exc)
        runtime.start_error = str(exc)  # the web UI shows it; the report says why it is invalid
        environment.process_exit_code = 2
        runtime.halted = True  # users Locust spawns before the stop lands send nothing
        if isinstance(runner, WorkerRunner):
            _refuse_worker(environment, str(exc))
        else:
            if isinstance(runner, MasterRunner):
                starts.refuse_workers(environment, str(exc))
            end_run(environment, "configuration error")
        runtime.ready.set()
        return False
    runtime.ready.set()
    if not environment.host and runtime.targets:
        environment.host = runtime.targets[0].spec.url
    if not isinstance(runner, WorkerRunner):
        starts.bound_by_scenario(environment, runtime)
        _start_reporting(environment, runtime)
    return True


def _start_when_runner_exists(environment: Any) -> None:
    import gevent

    for _ in range(1000):  # bounded: 10 s
        if environment.runner is not None:
            if getattr(environment, "loadkit", None) is None:
                on_init(environment)
            environment.events.test_start.fire(environment=environment)
            return
        gevent.sleep(0.01)
    log.error("loadkit: worker runner never came up; this worker sends no loadkit traffic")


def _start_reporting(environment: Any, runtime: Runtime) -> None:
    """On the node that writes the report: the manifest, and server metrics scraping."""
    from locust.runners import MasterRunner

    runner = environment.runner
    workers = runner.worker_count if isinstance(runner, MasterRunner) else 1
    if runtime.stats is not None:
        runtime.stats.set_manifest_fields(run_manifest(runtime, workers))
        runtime.stats.set_manifest_fields(preflight.manifest_fields(runtime))
    if runtime.server_metrics is not None:
        runtime.server_metrics.stop()
    runtime.server_metrics = ServerMetrics(runtime.targets, runtime.config.settings.scrape_interval_s)
    runtime.server_metrics.start()
    gpu.start_gpu(runtime)  # locust/gpuhooks.py


def _prepare_master(environment: Any, runtime: Runtime, options: Any) -> None:
    """Validate on the master too (its config goes to the workers); it sends nothing itself."""
    starts.begin(runtime, options, environment.host, (0, 1))
    # At once, not only in send_to_workers: pre-flight yields, and a worker asking for the
    # config meanwhile (CONFIG_REQUEST) must get this run's directory.
    runtime.start_plan = runtime.start_plan.with_(report_dir=runtime.starting.report_dir)
    runtime.schedules.send_no_schedule()


def _prepare_worker(environment: Any, runtime: Runtime, options: Any) -> None:
    given, plan = starts.worker_config(runtime)
    runner = environment.runner
    if plan.late:
        # Joined after the run started: the shares are already dealt. In closed loop it takes
        # a share of its own (deterministic, but not disjoint from the others); in open loop
        # it sends nothing, so the asked arrival rate stays exact. The master's report says so.
        runner.send_message(NOTE_MESSAGE, {"warning": f"worker {runner.worker_index} joined after the start: "
                                           "its requests are not a disjoint share of the workload"})  # fmt: skip
    shard = (runner.worker_index, runner.worker_index + 1) if plan.late else plan.shard
    runtime.starting.report_dir = plan.report_dir  # the master's choice for this run: raw logs go there
    starts.begin(runtime, options, environment.host, shard, (given, plan))
    if plan.late:
        runtime.schedules.silence_schedules()


def _refuse_worker(environment: Any, reason: str) -> None:
    """Tell the master why, then leave: a worker that cannot send the right traffic must not
    send any."""
    import gevent

    runner = environment.runner
    runner.send_message(REFUSED_MESSAGE, {"worker": runner.worker_index, "reason": reason})
    gevent.spawn_later(0.5, runner.quit)


def _master_notes_handler(runtime: Runtime) -> Callable[..., None]:
    def handler(environment: Any, msg: Any, **_: Any) -> None:
        data = msg.data or {}
        text = data.get("warning") or f"worker {data.get('worker')} refused: {data.get('reason')}"
        if "reason" in data:
            log.error("loadkit: %s", text)
        if runtime.stats is not None:
            runtime.stats.warn(text)

    return handler


def on_test_stop(environment: Any, **_: Any) -> None:
    """loadkit's part of the stop, then the stats' (which write the report)."""
    runtime: Runtime | None = getattr(environment, "loadkit", None)
    if runtime is None:
        return
    try:
        _account_stop(environment, runtime)
        served = runtime.stop_image_server()
        if served is not None and runtime.stats is not None:  # the report's images.served
            runtime.stats.section("images").served = served
    finally:
        if runtime.stats_listeners is not None:
            runtime.stats_listeners.stop()


def _account_stop(environment: Any, runtime: Runtime) -> None:
    """Before the stats close: account for overdue open-loop slots and state client saturation."""
    if not runtime.targets:
        return
    runtime.close_schedule()
    schedules = runtime.schedules
    runtime.snapshot_realised()
    if runtime.stats is not None:
        runtime.stats.set_manifest_fields(runtime.reachability_record.manifest())
    if schedules.shape_steps is not None and runtime.stats is not None:
        schedules.shape_steps.finish()
        runtime.stats.set_manifest_fields({"shape": schedules.shape_steps.manifest()})
    if runtime.server_metrics is not None:
        runtime.server_metrics.stop()
        if runtime.stats is not None:
            runtime.stats.set_manifest_fields({"server_metrics": runtime.server_metrics.section()})
    gpu.stop_gpu(runtime)
    tally = schedules.schedule_tally()
    if tally is None or runtime.stats is None:
        return
    summary = tally.summary()
    if runtime.sections is not None:
        # The manifest's schedule, from every process's counts (a master sums its workers').
        runtime.sections.schedule = tally
    else:
        runtime.stats.set_manifest_fields({"schedule": summary})
    saturated = bool(getattr(runtime.stats, "manifest", {}).get("client_saturation"))
    for target, s in summary.items():
        warning = behind_warning(target, s, runtime.config.schedule.late_threshold_ms, saturated)
        if warning is not None:
            runtime.stats.warn(warning)


def register(events: Any) -> None:
    """Add loadkit's listeners to a Locust ``Events`` (``locust.events`` for a locustfile); once
    per Events object, however often it is called (each loadkit user class calls it)."""
    if getattr(events, "loadkit_registered", False):
        return
    events.loadkit_registered = True
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(on_init)
    events.test_start.add_listener(on_test_start)
    events.test_stop.add_listener(on_test_stop)
    events.user_error.add_listener(on_user_error)
