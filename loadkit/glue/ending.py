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
    options = environment.parsed_options
    runner = environment.runner
    if options is not None and getattr(options, "headless", False):
        gevent.spawn(runner.quit)
    else:
        gevent.spawn(runner.stop)
