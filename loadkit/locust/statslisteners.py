"""The thin Locust glue for loadkit's stats: listeners, messages, greenlets. Imports locust and
gevent, so it lives in loadkit/locust/ (stats/ works without Locust).

Wired by loadkit's listeners (locust/listeners.py, ``wired=True``): they hand it this start's
StatsOptions (run/settings.py) and call :meth:`LocustStats.begin` / :meth:`LocustStats.stop`
after their own test start / test stop, so no order of Locust listeners is relied on. Used
alone (``loadkit.stats.install_stats``), it listens to test_start and test_stop itself and
reads its options from Locust's at each start.

Timeline on a distributed run (the part Locust gets wrong for us, docs/distributed.md):
- every worker report carries a cumulative snapshot (seq-numbered) under data["loadkit"];
- a worker's ``test_stop`` sends a final snapshot as the custom message ``loadkit_final``;
- the master's ``quit`` is wrapped so it tells workers to quit and then waits (bounded by
  --final-report-wait) for every final snapshot before Locust kills its message loop; Locust
  alone waits a fixed 0.5 s;
- workers that go missing (heartbeat) or never send a final are marked lost, data kept.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust import __version__ as locust_version
from locust.rpc import Message
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from loadkit.locust.cooperative import install_gevent_yield
from loadkit.locust.handover import handed_options
from loadkit.locust.rawshipping import RawLogShipping
from loadkit.report.console import console_table, final_summary, invalid_lines, task_error_lines
from loadkit.run.settings import stats_options
from loadkit.stats.collector import StatsCollector
from loadkit.stats.distributed import PAYLOAD_KEY, WorkerState
from loadkit.stats.options import StatsOptions
from loadkit.stats.rawlog import RawLog, raw_log_name
from loadkit.stats.turns import cooperative
from loadkit.stats.validity import EXIT_CONFIG_ERROR, EXIT_INVALID, exit_summary

log = logging.getLogger("loadkit.stats")

FINAL_MESSAGE = "loadkit_final"
RESET_MESSAGE = "loadkit_reset"
MONITOR_INTERVAL_S = 1.0


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Listener wrapper: an exception marks the run invalid instead of breaking Locust's loop."""

    @functools.wraps(method)
    def wrapper(self: LocustStats, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            self.collector.fail(f"loadkit stats listener {method.__name__} failed", exc)
            return None

    return wrapper


def options_of(parsed: Any, slos: tuple[Any, ...] | None = None) -> StatsOptions:
    """The stats' options from Locust's (``slos`` None: their own --slo). A value the web
    form got wrong never fails the stats: loadkit's start refuses that run, naming it."""
    return stats_options(parsed, slos, strict=False)


def install_stats(
    environment: Any, options: StatsOptions | None = None, wired: bool = False
) -> StatsCollector:
    """Create this node's collector and register every listener it needs. Call from ``init``."""
    install_gevent_yield()  # its live reports and snapshots give the hub turns (stats/turns.py)
    return LocustStats(environment, options, wired).collector


class LocustStats:
    """Binds a StatsCollector to one Locust environment (local, master or worker)."""

    def __init__(self, environment: Any, options: StatsOptions | None = None, wired: bool = False) -> None:
        self.env = environment
        self.runner = environment.runner
        self.role = ("master" if isinstance(self.runner, MasterRunner)
                     else "worker" if isinstance(self.runner, WorkerRunner) else "local")  # fmt: skip
        self.wired = wired  # loadkit's listeners call begin/stop (else this listens itself)
        self.runtime: Any = None  # loadkit's Runtime, when wired (set by locust/listeners.py)
        self.options = options if options is not None else options_of(handed_options(environment))
        self.collector = StatsCollector(self.options.slos)
        self.collector.max_failed_share = self.options.max_failed_share
        self.stopped = False
        self.quit_started = False
        self.final_written = False
        self.report_dir: str | None = None  # this run's (stats/rundir.py); None until a test starts
        self._dirs_used: list[str] = []  # without loadkit's glue: the directories claimed here
        self.shipping = RawLogShipping(self)  # raw logs of workers on other hosts, clock offsets
        self._register_events()
        self._start_greenlets()

    # -- wiring ---------------------------------------------------------------------------

    def _register_events(self) -> None:
        events = self.env.events
        if not self.wired:
            events.test_start.add_listener(self._on_test_start)
            events.test_stop.add_listener(self._on_test_stop)
        events.quitting.add_listener(self._on_quitting)
        if self.role == "worker":
            events.report_to_master.add_listener(self._on_report_to_master)
            self.runner.register_message(RESET_MESSAGE, self._on_reset_message)
        else:
            events.reset_stats.add_listener(self.collector.reset)
        if self.role == "master":
            events.worker_report.add_listener(self._on_worker_report)
            self.runner.register_message(FINAL_MESSAGE, self._on_final_message)
            self.collector.reset_listeners.append(self._propagate_reset)
            self._wrap_master_quit()

    def _start_greenlets(self) -> None:
        if self.role == "master":
            gevent.spawn(self._guard, self._monitor_workers)
        if self.role != "worker":
            if self.options.headless and self.options.console_table:
                gevent.spawn(self._guard, self._console_loop)
        if self.role != "master":
            gevent.spawn(self._guard, self._flush_loop)
        if self.role == "worker":
            gevent.spawn(self._guard, self.shipping.clock_loop)

    def _guard(self, loop: Any) -> None:
        """Run a background loop; an exception marks the run invalid instead of vanishing."""
        try:
            loop()
        except gevent.GreenletExit:
            raise
        except Exception as exc:
            self.collector.fail(f"loadkit stats greenlet {loop.__name__} died", exc)

    # -- run lifecycle --------------------------------------------------------------------

    @_guarded
    def _on_test_start(self, environment: Any, **_: Any) -> None:
        # Workers get the master's options just before test_start: read them again here.
        self.begin(options_of(handed_options(environment)))

    def stop(self) -> None:
        """This node's test stop (loadkit's test_stop listener calls it once its part is done)."""
        self._on_test_stop(self.env)

    @_guarded
    def begin(self, options: StatsOptions) -> None:
        """A test start: this run's options (its SLOs resolved by the run set-up), fresh stats,
        the raw log in the run's directory."""
        self.options = options
        self.stopped = False
        self.final_written = False
        collector = self.collector
        collector.set_slos(options.slos)
        collector.max_failed_share = self.options.max_failed_share
        if self.role == "worker":
            self.shipping.correct_clock()  # before the reset: the new stats take it
        collector.reset(propagate=False)  # every node resets on its own test_start
        if self.role == "worker":
            collector.worker_index = self.runner.worker_index
        if collector.raw_log is not None:
            collector.raw_log.close()
            collector.raw_log = None
        runtime = self.runtime
        ready = getattr(runtime, "ready", None)
        if self.role == "worker" and ready is not None and not ready.is_set():
            # The master's config (which names the run's directory) comes after this start:
            # its users wait for it (runtime.ready), and so does the raw log.
            self.report_dir = None
            gevent.spawn(self._guard, functools.partial(self._start_when_ready, runtime))
            return
        self._start_in(self._run_dir(runtime))

    def _start_when_ready(self, runtime: Any) -> None:
        runtime.ready.wait()
        self._start_in(self._run_dir(runtime))

    def _start_in(self, report_dir: str | None) -> None:
        self.report_dir = report_dir
        collector = self.collector
        if self.role != "master" and self.options.raw_log and report_dir is not None:
            # A new run starts a new log, so the log holds exactly the requests of report.json.
            index = collector.worker_index if self.role == "worker" else None
            path = os.path.join(report_dir, raw_log_name(index))
            collector.raw_log = RawLog(path, truncate=True, events=self.options.raw_log_events)
            if self.role == "worker" and index is not None:
                self.shipping.start_worker(report_dir, path, index)
        if self.role == "master":
            self.shipping.start_master()
        collector.set_manifest_fields(self._manifest())

    def _run_dir(self, runtime: Any) -> str | None:
        """This run's directory: the one loadkit's glue claimed (local, master) or was sent
        (worker); without the glue, claimed here (one per run all the same)."""
        chosen = runtime.starting.report_dir if runtime is not None else None
        if isinstance(chosen, str) and chosen:
            return chosen
        if self.role == "worker":
            if getattr(runtime, "start_error", None):
                return None  # a refused worker sends nothing and writes nothing
            return self.options.report_dir
        if getattr(runtime, "start_error", None):
            return None  # the glue could not create it: said there, and the report says why
        from loadkit.stats.rundir import claim_report_dir

        try:
            chosen = claim_report_dir(self.options.given_report_dir, self._dirs_used)
        except OSError as exc:
            self.collector.fail("--report-dir: cannot create the run's directory", exc)
            return None
        self._dirs_used.append(os.path.abspath(chosen))
        return chosen

    def _manifest(self) -> dict[str, Any]:
        from loadkit import __version__

        # No argv: command lines can carry secrets (API keys) and report.json gets shared.
        return {"role": self.role, "loadkit_version": __version__, "locust_version": locust_version,
                "host": socket.gethostname(), "pid": os.getpid(),
                "report_dir": os.path.abspath(self.report_dir) if self.report_dir else None,
                "raw_log": self.options.raw_log,
                "raw_log_events": self.options.raw_log_events,
                "expect_workers": self.options.expect_workers if self.role == "master" else None}  # fmt: skip

    @_guarded
    def _on_test_stop(self, environment: Any, **_: Any) -> None:
        self.stopped = True
        self.collector.mark_stopped()
        if self.collector.raw_log is not None:
            self.collector.raw_log.flush()
        if self.role == "worker":
            self.shipping.ship_rest()  # its lines reach the master before the final snapshot
            self._send_final()
        elif self.role == "master" and not self.quit_started:
            # Stop from the web UI: workers are already stopped and have sent their finals.
            self._await_finals()
            self._write("test_stop", final=self._web_ui_run())
        elif self.role == "local":
            self._write("test_stop", final=self._web_ui_run())

    def _web_ui_run(self) -> bool:
        """A run stopped in the web UI is over: its directory is never written again (the next
        Start takes another, stats/rundir.py), so its stop is its final write (report.html,
        loadkit_report_written). A headless run's final write comes at quitting."""
        return not self.options.headless

    @_guarded
    def _on_quitting(self, environment: Any, **_: Any) -> None:
        try:
            if self.role == "master" and not self.quit_started:
                self.runner.quit()  # SIGTERM / Ctrl-C: collect finals before anything is written
            if self.role != "worker":
                self._write("quitting", final=True)
            elif self.collector.raw_log is not None:
                self.collector.raw_log.close()
        finally:
            if self.collector.error_count:
                self._exit_invalid()

    # -- worker side ----------------------------------------------------------------------

    @_guarded
    def _on_report_to_master(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        try:
            self.collector.worker_index = self.runner.worker_index
            if not self.stopped:
                # Streams are open: the histogram flushes (the bulk) give way; the snapshot
                # itself is then taken at once, so that it is consistent (turns.py).
                with cooperative():
                    self.collector.flush_pending()
            if self.collector.raw_log is not None:
                # Every request this snapshot counts has its line with the OS before the
                # snapshot leaves: a worker killed after it loses nothing the master shows.
                self.collector.raw_log.flush_pending()
            data[PAYLOAD_KEY] = self._payload(final=self.stopped)
        except Exception as exc:
            self.collector.fail("building the stats snapshot failed", exc)

    def _send_final(self) -> None:
        try:
            self.runner.send_message(FINAL_MESSAGE, self._payload(final=True))
        except Exception as exc:
            self.collector.fail("sending the final stats snapshot failed", exc)

    def _payload(self, final: bool) -> dict[str, Any]:
        return {**self.collector.snapshot_payload(final=final), **self.shipping.payload_fields()}

    @_guarded
    def _on_reset_message(self, environment: Any, msg: Message, **_: Any) -> None:
        self.collector.reset(propagate=False)

    # -- master side ----------------------------------------------------------------------

    @_guarded
    def _on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(PAYLOAD_KEY)
        if payload is None:
            self.collector.warn(
                f"worker {client_id} sends no loadkit stats (is loadkit's locustfile loaded there?)"
            )
            return
        self.shipping.note_payload(payload)
        self.collector.accept_snapshot(client_id, payload)

    @_guarded
    def _on_final_message(self, environment: Any, msg: Message, **_: Any) -> None:
        self.shipping.note_payload(msg.data)
        self.collector.accept_snapshot(msg.node_id, msg.data)

    def _propagate_reset(self) -> None:
        try:
            self.runner.send_message(RESET_MESSAGE, {"v": 1})
        except Exception as exc:
            self.collector.fail("propagating a stats reset to workers failed", exc)

    def _wrap_master_quit(self) -> None:
        """Tell workers to quit, then wait for their finals before Locust's own quit runs."""
        runner, original = self.runner, self.runner.quit

        def quit_collecting_finals() -> None:
            if not self.quit_started:
                self.quit_started = True
                runner.stop(send_stop_to_client=False)
                for client in list(runner.clients.all):
                    runner.server.send_to_client(Message("quit", None, client.id))
                self._await_finals()
            original()

        runner.quit = quit_collecting_finals

    def _connected_workers(self) -> list[str]:
        return [c.id for c in self.runner.clients.all if c.state != STATE_MISSING]

    def _await_finals(self) -> None:
        """Wait (bounded) for a final snapshot from every worker; mark the silent ones lost."""
        remote = self.collector.remote
        for client_id in self._connected_workers():
            if client_id not in remote.workers:
                remote.workers[client_id] = WorkerState(client_id)
        # Workers first let running requests finish for up to --stop-timeout, then report.
        wait = self.options.final_report_wait + float(getattr(self.env, "stop_timeout", None) or 0)
        deadline = time.monotonic() + wait
        # ... and for the shipped raw logs to hold every line the finals count (a chunk lost on
        # the way is sent again from the worker's flush loop).
        while (remote.pending_finals() or self.shipping.pending()) and time.monotonic() < deadline:
            gevent.sleep(0.05)
        for client_id in remote.pending_finals():
            remote.mark_lost(client_id, f"no final stats within {wait:g} s of stop")
        self._fill_worker_indexes()

    def _monitor_workers(self) -> None:
        while True:
            gevent.sleep(MONITOR_INTERVAL_S)
            self._check_workers()

    def _check_workers(self) -> None:
        """Mark workers lost when Locust reports them missing or forgets them without a final."""
        remote, clients = self.collector.remote, self.runner.clients
        for client_id, state in list(remote.workers.items()):
            if state.final or state.lost_at is not None:
                continue
            node = clients.get(client_id)
            if node is None and self.runner.state in (STATE_RUNNING, STATE_SPAWNING):
                remote.mark_lost(client_id, "worker disappeared without a final snapshot")
            elif node is not None and node.state == STATE_MISSING:
                remote.mark_lost(client_id, "heartbeat missing")
        self._fill_worker_indexes()

    def _fill_worker_indexes(self) -> None:
        indexes = getattr(self.runner, "worker_indexes", {})
        for client_id, state in self.collector.remote.workers.items():
            if state.index is None:
                state.index = indexes.get(client_id)

    # -- output ---------------------------------------------------------------------------

    def _write(self, why: str, final: bool = False) -> None:
        """Write the report files (atomically); the final write also prints and calls plugins."""
        if self.final_written:
            return
        from loadkit.plugins import get_plugin_manager
        from loadkit.report.dispatch import write_all

        if self.report_dir is None:  # no test started (a web UI quit unused), or its directory failed
            self.report_dir = self._run_dir(self.runtime)
            if self.report_dir is None:
                return
            self.collector.set_manifest_fields({"report_dir": os.path.abspath(self.report_dir)})
        if self.role == "master":
            self.shipping.note_in_report(final)
        try:  # every writer is a plugin, loadkit's own included (report/dispatch.py)
            report = write_all(get_plugin_manager(), self.collector, self.report_dir, final)
        except Exception as exc:
            self.collector.fail(f"writing reports at {why} failed", exc)
            return
        if final:
            self.final_written = True
            exit_line = self._exit_line(report)
            if self.options.console_table:
                sys.stdout.write(final_summary(report, exit_line) + "\n")
                sys.stdout.flush()
            else:  # said even without the table: the exit code needs a why
                if not report["valid"]:
                    log.error("loadkit: %s", "\n".join(invalid_lines(report)))
                if task_error_lines(report):
                    log.warning("loadkit: %s", "\n".join(task_error_lines(report)))
                if exit_line:
                    log.warning("loadkit: %s", exit_line)
            log.info("loadkit reports written to %s (valid: %s)", self.report_dir, report["valid"])
        if not report["valid"]:
            self._exit_invalid()
        elif self.env.process_exit_code == EXIT_INVALID:
            self.env.process_exit_code = None  # a later run (web UI) was valid: Locust decides

    def _exit_line(self, report: dict[str, Any]) -> str | None:
        """The exit code the process is about to end with, and why (None: a start error set 2,
        said already). Only the final write calls it: Locust exits once ``quitting`` is done."""
        if self.env.process_exit_code == EXIT_CONFIG_ERROR:
            return None
        errors = getattr(self.runner, "errors", None) or {}
        other = sum(e.occurrences for e in errors.values() if getattr(e, "method", "LLM") != "LLM")
        return exit_summary(report, self.options.exit_code_on_error, other)

    def _exit_invalid(self) -> None:
        """Exit code 3, unless a configuration error already set 2 (the run never started)."""
        if self.env.process_exit_code != EXIT_CONFIG_ERROR:
            self.env.process_exit_code = EXIT_INVALID

    def _console_loop(self) -> None:
        while True:
            gevent.sleep(self.options.stats_interval)
            if self.runner is not None and self.runner.state in (STATE_RUNNING, STATE_SPAWNING):
                with cooperative():  # streams are open: the table must not hold their reads
                    table = console_table(self.collector.report(live=True))
                sys.stdout.write(table + "\n")
                sys.stdout.flush()

    def _flush_loop(self) -> None:
        while True:
            gevent.sleep(1.0)
            if self.collector.raw_log is not None:
                self.collector.raw_log.flush_pending()
            if self.role == "worker":
                self.shipping.tick()  # after the flush: the lines it sends are on disk
