"""Locust user classes that stream generations through an engine adapter.

Closed loop: each virtual user sends its next request (or runs its next session) as soon as
the previous one ends. Requests never go through Locust's HTTP client; the stream timer owns
the socket so event arrival is stamped at the read (DESIGN.md §6). One Locust `request`
event per finished request keeps Locust's own tables and exit codes meaningful, without the
per-token cost.
"""

from __future__ import annotations

import time

import gevent
from locust import FastHttpUser, constant, task
from locust.exception import StopUser

from loadkit.glue.failures import FAILURE_TEXTS, RequestOutcomeError  # noqa: F401 (was defined here)
from loadkit.glue.runtime import Runtime
from loadkit.httpstream import ConnectionPool
from loadkit.records import RequestRecord, e2e_ms
from loadkit.timer import run_request
from loadkit.types import CANCELLED, OK, GenerationRequest


def get_runtime(environment) -> Runtime:
    runtime = getattr(environment, "loadkit", None)
    if runtime is None:
        raise RuntimeError("loadkit runtime missing: use loadkit's locustfile (locustfiles/llm.py)")
    return runtime


class LLMUser(FastHttpUser):
    """Streams the scenario's requests and sessions to one target, back to back."""

    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        self.runtime = get_runtime(self.environment)
        if self.runtime.halted:
            return  # its first task stops it (StopUser here would be logged as an error)
        self.target = self.runtime.next_target()
        self.source = self.runtime.sources[self.target.name]
        self.pool = ConnectionPool()
        self.session_header = getattr(self.environment.parsed_options, "session_header", "") or ""
        self.backoff = self.runtime.new_backoff()

    def on_stop(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()

    @task
    def next_work(self) -> None:
        if self.runtime.halted:
            raise StopUser()  # the breaker (or a failed start) stopped the run; the stop is on its way
        dispatcher = self.runtime.dispatchers.get(self.target.name)
        t_sched, stage = None, None
        if dispatcher is not None:
            if not self.runtime.take_budget():
                self.runtime.workload_exhausted()
                raise StopUser()
            slot = self._wait_for_slot(dispatcher)
            if slot is None:
                return
            t_sched, stage = slot
        item = self.source.next_item()
        if item is None:
            self.runtime.workload_exhausted()
            raise StopUser()
        if isinstance(item, GenerationRequest):
            item.t_sched_ns, item.stage = t_sched, stage or item.stage
            self.send(item, budgeted=dispatcher is not None)
        else:
            self.run_session(item, t_sched, stage)

    def _wait_for_slot(self, dispatcher) -> tuple[int, str] | None:
        """Sleep until this user's next scheduled send; None if it was dropped as too late."""
        while not dispatcher.started:
            gevent.sleep(0.01)  # until spawning completes (bounded by the run itself)
        slot = dispatcher.next_slot()
        if slot is None:
            self.runtime.workload_exhausted()
            raise StopUser()
        t_sched, _ = slot
        try:
            delay = (t_sched - time.perf_counter_ns()) / 1e9
            if delay > 0:
                gevent.sleep(delay)
        except BaseException:
            dispatcher.give_back()  # stopped before the slot was due: never scheduled
            raise
        if not dispatcher.admit(t_sched, time.perf_counter_ns()):
            self.runtime.sent -= 1  # the budget counted a send that did not happen
            self.runtime.count_dropped(slot[1])
            return None
        return slot

    def run_session(self, session, t_sched: int | None = None, stage: str | None = None) -> None:
        """Turn after turn; a failed turn breaks the session and its later turns are not sent.
        In open loop only the session's first turn has a scheduled time."""
        request = session.next_request(None, True)
        if request is not None:
            request.t_sched_ns, request.stage = t_sched, stage or request.stage
        budgeted = t_sched is not None
        stage = request.stage if request is not None else None
        try:
            while request is not None:
                if request.stage is None:
                    request.stage = stage  # later turns belong to the stage the session began in
                record = self.send(request, budgeted=budgeted)
                budgeted = False
                ok = record.outcome == OK
                request = session.next_request(
                    record.text if ok else None, ok, None if ok else record.outcome
                )
                if request is not None:
                    gevent.sleep(session.think_time_s())
        except BaseException:
            # Stopped mid-session (test stop, budget spent): the session did not complete.
            session.next_request(None, False, CANCELLED)
            raise
        finally:
            self._session_ended(session)

    def _session_ended(self, session) -> None:
        if self.runtime.sessions is not None:
            self.runtime.sessions.add_session(self.target.name, session)

    def send(self, request: GenerationRequest, budgeted: bool = False) -> RequestRecord:
        wait, self._retry_wait = getattr(self, "_retry_wait", 0.0), 0.0
        if wait > 0:
            gevent.sleep(wait)  # Retry-After (with --honor-retry-after), or backoff after a fast failure
            if not budgeted and self.runtime.halted:
                raise StopUser()
        if not budgeted and not self.runtime.take_budget():
            self.runtime.workload_exhausted()
            raise StopUser()
        if request.stage is None:
            request.stage = self.runtime.stage_now()
        self.runtime.count_sent(request)
        headers = {}
        if self.session_header and request.session_id:
            headers[self.session_header] = request.session_id
        return run_request(
            self.target.adapter,
            self.target.endpoint,
            request,
            engine=self.target.name,
            timeouts=self.runtime.timeouts,
            pool=self.pool,
            extra_headers=headers,
            sink=self._finished,
        )

    def _finished(self, record: RequestRecord) -> None:
        self.runtime.record(record)
        self._retry_wait = self.runtime.retry_wait(record, getattr(self, "backoff", None))
        if record.outcome == CANCELLED:
            # Stopped by the test, not failed by the server: loadkit counts it; Locust's
            # table would show it either as a failure or as a short success, both wrong.
            return
        e2e = e2e_ms(record)
        self.environment.events.request.fire(
            request_type="LLM",
            name=f"{record.engine} {record.label}",
            response_time=e2e if e2e is not None else 0.0,
            response_length=record.n_out or 0,
            exception=None if record.outcome == OK else FAILURE_TEXTS.error_for(record),
            context={"request_id": record.request_id},
        )
