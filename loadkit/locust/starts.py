"""When a process configures: once per test start per process role, and how the master's
run configuration reaches its workers.

A headless run is first checked at ``init`` (so a bad option exits 2 before Locust starts
anything) and then started: the configuration made at ``init`` is the one the first test start
uses, unless the options changed in between. Later starts (the web UI's) configure afresh,
since a run consumes its workload. ``Runtime.configured`` counts the configurations.

Master → workers: one ``CONFIG_MESSAGE`` per worker at test start (its shard inside), sent
before Locust's spawn message on the same connection, so a worker has it when its own
test_start fires. A worker that joins while a run is going gets the same config without a
shard (``late``).

A worker can miss that message: Locust's worker processes its first messages while its runner
is still being built, before ``init`` (where the handler is registered) fires — a master that
starts the moment the worker is ready, or rebalances onto a late worker, sends config and
spawn into that window. Such a worker asks again (``CONFIG_REQUEST``) and finishes its test
start when the answer comes; its users wait for that (``Runtime.ready``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from loadkit.run.errors import ConfigError
from loadkit.run.runconfig import CONFIG_MESSAGE, SCENARIO, RunConfig, StartPlan, open_loop_spawn_rate
from loadkit.run.settings import launch_facts

CONFIG_REQUEST = "loadkit_run_config_request"
CONFIG_WAIT_S = 15.0  # a worker waits this long for the master's answer before refusing

# Options Locust itself fills in between init and the first start (headless defaults); loadkit
# does not read them at configure, so they do not make a configuration stale.
LOCUST_FILLED = ("num_users", "spawn_rate")


Given = tuple[RunConfig, StartPlan]  # a worker's: the master's decisions and start plan


class StartState:
    """How this process's test starts are going (``runtime.starting``): the options the current
    configuration was prepared for, a worker's message from the master, the timer of a
    scenario's duration_s ending a headless run, and the run's report directory."""

    def __init__(self) -> None:
        self.prepared_for: str | None = None  # the options the current configuration was made for
        self.from_master: Any = None  # worker: the master's run configuration message, as received
        self.asked_config = False  # worker: asked the master to send it again (ask_for_config)
        self.run_timer: Any = None  # a scenario's duration_s ending a headless run (bound_by_scenario)
        # This run's report directory (local / master: claimed at test start, claim_report_dir;
        # a worker: the master's), and every one this process's runs took (never used again).
        self.report_dir: str | None = None
        self.report_dirs_used: list[str] = []


def start_key(options: Any, host: str | None, shard: tuple[int, int], given: Given | None) -> str:
    values = sorted((k, repr(v)) for k, v in vars(options).items() if k not in LOCUST_FILLED)
    return repr((values, host, shard, given))


def prepare(runtime: Any, options: Any, host: str | None, shard: tuple[int, int],
            given: Given | None = None) -> RunConfig:  # fmt: skip
    """The configuration for the coming start: the one already made for these very options
    (the headless early check's), else a new one."""
    key = start_key(options, host, shard, given)
    if runtime.starting.prepared_for != key:
        runtime.starting.prepared_for = None  # a failed configure leaves nothing to reuse
        runtime.configure(options, host, shard, given)
        runtime.starting.prepared_for = key
    else:
        take_launch(runtime, options)
    return runtime.config


def take_launch(runtime: Any, options: Any) -> None:
    """-u and --spawn-rate as Locust set them since the configuration was made (a headless
    run's defaults, the web form's values): the configuration's launch facts (RunConfig.with_launch)."""
    runtime.config = runtime.config.with_launch(launch_facts(options))


def claim_report_dir(runtime: Any, given: str) -> str:
    """Local / master, first thing at test start: this run's own report directory (created;
    stats/rundir.py), so even a start refused below writes nowhere but there. ConfigError
    naming --report-dir when it cannot be created."""
    import logging

    from loadkit.stats.rundir import claim_report_dir as claim

    runtime.starting.report_dir = None  # never the last run's, whatever fails below
    try:
        chosen = claim(given, runtime.starting.report_dirs_used)
    except OSError as exc:
        raise ConfigError(
            f"--report-dir {given or '(default)'}: cannot create the run's directory: {exc}"
        ) from None
    runtime.starting.report_dir = chosen
    runtime.starting.report_dirs_used.append(os.path.abspath(chosen))
    log = logging.getLogger("loadkit")
    if given and chosen != given.rstrip("/\\"):
        log.warning(
            "loadkit: --report-dir %s holds an earlier run: this run's reports go to %s", given, chosen
        )
    else:
        log.info("loadkit: this run's reports go to %s", chosen)
    return chosen


def begin(runtime: Any, options: Any, host: str | None, shard: tuple[int, int],
          given: Given | None = None) -> RunConfig:  # fmt: skip
    """Test start: prepare, then use the configuration up (the next start makes its own)."""
    config = prepare(runtime, options, host, shard, given)
    runtime.starting.prepared_for = None
    runtime.arm()
    return config


# -- master → workers ----------------------------------------------------------------------


def send_to_workers(environment: Any, runtime: Any) -> None:
    """Master, at test start: each worker its shard, with the rest of the run configuration."""
    runner = environment.runner
    workers = sorted(runner.clients.keys(), key=runner.get_worker_index)
    shards = {client_id: (i, len(workers)) for i, client_id in enumerate(workers)}
    runtime.start_plan = runtime.start_plan.with_(shards=shards, report_dir=runtime.starting.report_dir)
    for client_id, shard in shards.items():
        runner.send_message(CONFIG_MESSAGE, runtime.config.to_wire(runtime.start_plan, shard), client_id)


class StartRefused(Exception):
    """Worker: the master refused this start (pre-flight, a bad option); send nothing."""


def refuse_workers(environment: Any, reason: str) -> None:
    """Master, at a refused test start: each worker hears it before Locust's spawn message,
    so none sends under the configuration of an earlier start."""
    runner = environment.runner
    for client_id in list(runner.clients.keys()):
        runner.send_message(CONFIG_MESSAGE, {"refused": reason}, client_id)


def install_master(environment: Any, runtime: Any) -> None:
    """A worker that connects while a run is going gets the run's configuration, as late."""
    from locust.runners import STATE_RUNNING, STATE_SPAWNING

    def on_worker_connect(client_id: str, **_: Any) -> None:
        if environment.runner.state in (STATE_RUNNING, STATE_SPAWNING) and runtime.start_plan.shards:
            wire = runtime.config.to_wire(runtime.start_plan, None)
            environment.runner.send_message(CONFIG_MESSAGE, wire, client_id)

    environment.events.worker_connect.add_listener(on_worker_connect)

    def on_request(msg: Any, **_: Any) -> None:
        if runtime.config is None:
            return  # no run configured yet: the test start sends it
        if runtime.start_error is not None:
            # The start was refused and stopped; Locust can still deliver its spawn message to a
            # worker after the stop, whose users must then send nothing (issue 32).
            environment.runner.send_message(CONFIG_MESSAGE, {"refused": runtime.start_error}, msg.node_id)
            return
        shard = (runtime.start_plan.shards or {}).get(msg.node_id)
        wire = runtime.config.to_wire(runtime.start_plan, shard)
        environment.runner.send_message(CONFIG_MESSAGE, wire, msg.node_id)

    environment.runner.register_message(CONFIG_REQUEST, on_request)


def install_worker(environment: Any, runtime: Any) -> None:
    def on_config(msg: Any, **_: Any) -> None:
        runtime.starting.from_master = msg.data

    environment.runner.register_message(CONFIG_MESSAGE, on_config)


def ask_for_config(environment: Any, runtime: Any, finish: Any) -> bool:
    """Worker, at test start without the master's config (it came before the handler existed):
    ask for it once and finish the start in a greenlet when it comes (``finish(environment)``);
    True when asked. The worker message loop is where the answer arrives, so nothing here waits."""
    if runtime.starting.from_master is not None or runtime.starting.asked_config:
        runtime.starting.asked_config = False
        return False
    import gevent

    runtime.starting.asked_config = True
    environment.runner.send_message(CONFIG_REQUEST, None)

    def wait_then_finish() -> None:
        deadline = time.monotonic() + CONFIG_WAIT_S
        while runtime.starting.from_master is None and time.monotonic() < deadline:
            gevent.sleep(0.05)
        finish(environment)  # refuses, naming why, when the answer never came

    gevent.spawn(wait_then_finish)
    return True


def worker_config(runtime: Any) -> Given:
    """Worker, at test start: the master's configuration; ConfigError when there is none, when
    it is of another version, or when this worker's plugins differ from the master's."""
    if runtime.starting.from_master is None:
        raise ConfigError("no run configuration came from the master before its spawn message: "
                          "run the same loadkit on every node")  # fmt: skip
    if isinstance(runtime.starting.from_master, dict) and "refused" in runtime.starting.from_master:
        reason = runtime.starting.from_master["refused"]
        runtime.starting.from_master = None  # the next start's configuration comes before its spawn
        raise StartRefused(reason)
    config, plan = RunConfig.from_wire(runtime.starting.from_master)
    mine = runtime.fingerprint()
    if config.plugins != mine:
        raise ConfigError(
            f"this worker's plugins differ from the master's: worker {mine}, master {config.plugins}; "
            "install the same loadkit plugins (or LOADKIT_LOAD_PLUGINS) on every node"
        )
    return config, plan


# -- what Locust itself is asked to do ------------------------------------------------------


def spawn_open_loop_at_once(environment: Any, runtime: Any) -> None:
    """Open loop: the runner spawns every sender at once, whatever spawn rate it is given
    (run/runconfig.py open_loop_spawn_rate); the options are not touched."""
    runner = environment.runner
    start = runner.start

    def start_senders(user_count: int, spawn_rate: float, *args: Any, **kwargs: Any) -> None:
        rate = open_loop_spawn_rate(spawn_rate, user_count, runtime.schedules.sends_open_loop) or spawn_rate
        start(user_count, rate, *args, **kwargs)

    runner.start = start_senders


def bound_by_scenario(environment: Any, runtime: Any) -> None:
    """A headless run without -t whose scenario gives duration_s (and no stages) ends then."""
    import gevent

    from loadkit.locust.ending import end_run

    if runtime.starting.run_timer is not None:
        runtime.starting.run_timer.kill(block=False)
        runtime.starting.run_timer = None
    config = runtime.config
    if config.run_time_source == SCENARIO and config.run_time_s and environment.shape_class is None:
        runtime.starting.run_timer = gevent.spawn_later(config.run_time_s, end_run, environment,
                                               "the scenario's duration_s is over")  # fmt: skip
