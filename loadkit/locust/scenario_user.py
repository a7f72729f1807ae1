"""ScenarioUser: a user that sends a scenario's requests and sessions, back to back or on schedule.

Class attributes: ``scenario`` (a shipped scenario's name or a path; None: ``--scenario``) and
``target`` (a target's name; None: the run's targets in turn). Closed loop: each user sends its
next request (or runs its next session) as soon as the previous one ends. Open loop: users are
a pool of senders taking the scenario's scheduled send times (loadkit.run.openloop).

Each subclass gets its own scenario task, tagged ``scenario`` and with the scenario's name, so
``--tags`` / ``--exclude-tags`` select scenario traffic as they select any other task.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gevent
from locust.exception import StopUser

from loadkit.conversation import break_reason
from loadkit.locust.taskerrors import STOPS
from loadkit.locust.user import LLMUser
from loadkit.records import RequestRecord
from loadkit.run.openloop import Dispatcher
from loadkit.run.workloads import class_dir
from loadkit.types import OK, GenerationRequest
from loadkit.workload.shipped import scenario_tags

TASK_MARK = "loadkit_scenario_task"


def scenario_task(cls: type) -> Callable[[Any], None]:
    """A task of its own for ``cls``, so its tags can name the class's scenario."""

    def send_scenario(user: ScenarioUser) -> None:
        user.next_work()

    ref = getattr(cls, "scenario", None)
    send_scenario.locust_tag_set = {"scenario"} | (scenario_tags(ref, class_dir(cls)) if ref else set())  # type: ignore[attr-defined]
    setattr(send_scenario, TASK_MARK, True)
    return send_scenario


class ScenarioUser(LLMUser):
    """Streams its scenario's requests and sessions to one target; see the module docstring."""

    abstract = True
    scenario: str | None = None
    loadkit_sends_scenario = True  # workloads.SCENARIO_CLASS_FLAG: the runtime loads its scenario

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [t for t in cls.tasks if not getattr(t, TASK_MARK, False)]
        cls.tasks = [*own, scenario_task(cls)]

    def on_start(self) -> None:
        super().on_start()
        if self.runtime.halted:
            return  # a refused start has no workload; the first task stops this user
        self.workload = self.runtime.workload_for(type(self))

    @property
    def source(self) -> Any:
        """The workload's requests for this user's target (looked up each time: a worker's share
        may be dealt again before its schedule starts)."""
        return self.workload.sources[self.target.name]

    def next_work(self) -> None:
        if self.runtime.halted:
            raise StopUser()  # the breaker (or a failed start) stopped the run; the stop is on its way
        dispatcher = self.workload.dispatchers.get(self.target.name)
        t_sched, stage = None, None
        if dispatcher is not None:
            if not self._take_budgets():
                self.runtime.workload_exhausted()
                raise StopUser()
            slot = self._wait_for_slot(dispatcher)
            t_sched, stage = slot[0], self.runtime.schedules.slot_stage(slot[1])
        item = self.source.next_item()
        if item is None:
            self.runtime.workload_exhausted()
            raise StopUser()
        if dispatcher is not None and not self._allowed(dispatcher, slot):
            return
        if isinstance(item, GenerationRequest):
            item.t_sched_ns, item.stage = t_sched, stage or item.stage
            self._send_counted(item, budgeted=dispatcher is not None)
        else:
            self.run_session(item, t_sched, stage)

    def _allowed(self, dispatcher: Dispatcher, slot: tuple[int, str]) -> bool:
        """The prompt is built: send, unless it is now later than --max-lag (then dropped)."""
        if dispatcher.allow(slot[0], time.perf_counter_ns(), slot[1]):
            return True
        self._give_back_budgets()
        self.runtime.schedules.count_dropped(slot[1])
        return False

    def _give_back_budgets(self) -> None:
        self.runtime.requests.give_back()  # the budgets counted a send that did not happen
        self.workload.give_back()

    def _finished(self, record: RequestRecord) -> None:
        if record.t_sched_ns is not None:
            dispatcher = self.workload.dispatchers.get(self.target.name)
            if dispatcher is not None:
                dispatcher.sent(record.t_sched_ns, record.t_send_ns, record.stage)
        super()._finished(record)

    def _take_budgets(self) -> bool:
        """The scenario's max_requests, then --max-requests (open loop: before waiting for a slot)."""
        if not self.workload.take_budget():
            return False
        if self.runtime.take_budget():
            return True
        self.workload.give_back()
        return False

    def _send_counted(self, request: GenerationRequest, budgeted: bool) -> RequestRecord:
        """Send, counting the request against the scenario's max_requests first (``send``
        counts it against --max-requests) unless the slot already did both."""
        if not budgeted and not self.workload.take_budget():
            self.runtime.workload_exhausted()
            raise StopUser()
        return self.send(request, budgeted=budgeted)

    def _wait_for_slot(self, dispatcher: Dispatcher) -> tuple[int, str]:
        """Sleep until this user's next scheduled send. A slot due once the run is stopping
        (-t is over; --stop-timeout only lets in-flight requests finish) is never sent."""
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
            if self.runtime.schedules.schedule_end_ns is not None:
                raise StopUser()  # the run is over: no new request may start
        except BaseException:
            dispatcher.give_back(slot[1])  # stopped before the slot was due: never scheduled
            self._give_back_budgets()
            raise
        return slot

    def run_session(self, session: Any, t_sched: int | None = None, stage: str | None = None) -> None:
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
                record = self._send_counted(request, budgeted=budgeted)
                budgeted = False
                ok = record.outcome == OK
                request = session.next_request(
                    record.text if ok else None, ok, None if ok else record.outcome, record.tool_calls
                )
                if request is not None:
                    gevent.sleep(session.think_time_s())
        except BaseException as exc:
            # Stopped mid-session (test stop, budget spent: cancelled), or this task's own code
            # raised (task_error, counted in task_errors too): the session did not complete.
            session.next_request(None, False, break_reason(exc, STOPS))
            raise
        finally:
            self._session_ended(session)

    def _session_ended(self, session: Any) -> None:
        if self.runtime.sections is not None:
            self.runtime.sections.add_session(self.target.name, session)
