"""Ending a run from inside: when the workload or --max-requests is used up, or set-up failed."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("loadkit")


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
    runner = environment.runner
    # A headless run ends with the process; a web UI run stops and waits for the next start.
    if getattr(getattr(environment, "loadkit", None), "headless", False):
        gevent.spawn(runner.quit)
    else:
        gevent.spawn(runner.stop)


def worker_done_handler() -> Any:
    """Master: end the run once every worker has said its share of the workload is done."""
    done: set[int] = set()

    def handler(environment: Any, msg: Any, **_: Any) -> None:
        done.add(msg.data.get("worker"))
        runner = environment.runner
        if len(done) >= runner.worker_count:
            done.clear()
            end_run(environment, "every worker finished its share of the workload")

    return handler


def stop_a_refused_start(environment: Any, runtime: Any) -> None:
    """Master: a start loadkit refused (``runtime.start_error``) was stopped at once, but the
    workers' "spawning complete" can arrive after that stop and set Locust's state back to
    running (seen: 23 ms after the stop), leaving the web UI's run "running" with no users.
    Stop it again when that happens."""
    if runtime.start_error is not None:
        end_run(environment, "the start was refused")
