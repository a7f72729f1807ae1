"""Circuit breaker: stop a run whose requests (nearly) all fail, and say why.

Rules, per target (a run with one dead target of two is no comparison either):
- the first ``first`` requests all failed (no ``ok`` yet): a dead or misconfigured target;
- more than ``failed_pct`` % of the last ``window`` requests failed, once at least
  ``min_count`` are in the window: a target that died during the run;
- no request succeeded for ``dead_after_s`` seconds and every one that ended in that time
  failed (``--breaker-dead-after``): a target that died during a run with few users, where
  backoff spaces the failures seconds apart and the window would take minutes to fill.
  Judged on finished requests' own end times, when the next failure ends.
``cancelled`` (stopped by the test) never counts; every other outcome but ``ok`` is a failure.

It runs where requests finish (local, or each worker on its own share): a worker sees its
failures at once, where the master would see them only with the next stats report (every
3 s). A worker's first-N rule counts its share of N (at least 5), the window rule is the same
share of failures on every node. Whichever node trips first stops the whole run: a worker
tells the master, which marks the run invalid with the reason (``stats.mark_invalid``, so the
report says why it stopped) and ends it. So a dead target costs about ``first`` requests
(at least 5 per worker), plus those in flight until the stop reaches every worker.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from loadkit.locust.ending import end_run
from loadkit.records import RequestRecord
from loadkit.run.breakerrules import BreakerRules
from loadkit.stats.msgtemplate import template_of
from loadkit.types import CANCELLED, OK

log = logging.getLogger("loadkit")

BREAKER_MESSAGE = "loadkit_breaker"
MAX_ERROR_KINDS = 32  # distinct error templates kept per target for the "top error" in the reason
ERROR_CHARS = 200


class TargetState:
    """One target's counts as seen by this node."""

    __slots__ = ("ok_seen", "failures", "window", "failed_in_window", "errors", "streak", "streak_since_ns",
                 "streak_error")  # fmt: skip

    def __init__(self, window: int) -> None:
        self.ok_seen = False
        self.failures = 0
        self.window: deque[bool] = deque(maxlen=max(window, 1))
        self.failed_in_window = 0
        # Error kinds by template (numbers and ids masked: stats/msgtemplate.py), so the top
        # error is the most frequent kind, not one of its texts: [count, first text, texts varied].
        self.errors: dict[str, list[Any]] = {}
        # Failures since the last ok: how many, when the first ended (perf_counter ns), its error.
        self.streak = 0
        self.streak_since_ns = 0
        self.streak_error = ""

    def add(self, failed: bool, error: str | None, outcome: str = "", t_end_ns: int = 0) -> None:
        if len(self.window) == self.window.maxlen and self.window[0]:
            self.failed_in_window -= 1  # the oldest falls out as the new one comes in
        self.window.append(failed)
        if not failed:
            self.ok_seen = True
            self.streak = 0
            return
        if not self.streak:
            self.streak_since_ns, self.streak_error = t_end_ns, error or "no error text"
        self.streak += 1
        self.failures += 1
        self.failed_in_window += 1
        if error is None:
            return
        kind = outcome + template_of(error[len(outcome) :])  # the outcome's own status is kept
        seen = self.errors.get(kind)
        if seen is not None:
            seen[0] += 1
            seen[2] = seen[2] or error != seen[1]
        elif len(self.errors) < MAX_ERROR_KINDS:
            self.errors[kind] = [1, error, False]

    def top_error(self) -> str:
        if not self.errors:
            return "no error text"
        count, text, varied = max(self.errors.values(), key=lambda seen: seen[0])
        return f"{count} × {'e.g. ' if varied else ''}{text}"


class Breaker:
    """Watches every finished request of this node; `observe` names the rule that tripped."""

    def __init__(self, rules: BreakerRules) -> None:
        self.rules = rules
        self.targets: dict[str, TargetState] = {}
        self.reason: str | None = None

    def observe(self, record: RequestRecord) -> str | None:
        """O(1) per request. Returns the reason once, on the request that trips the breaker."""
        if record.outcome == CANCELLED or self.reason is not None:
            return None
        state = self.targets.get(record.engine)
        if state is None:
            state = self.targets[record.engine] = TargetState(self.rules.window)
        failed = record.outcome != OK
        t_end_ns = record.t_end_ns or time.perf_counter_ns()
        state.add(failed, error_key(record) if failed else None, record.outcome, t_end_ns)
        if not failed:
            return None
        why = self._rule(state, t_end_ns)
        if why is None:
            return None
        self.reason = (f"circuit breaker: target {record.engine!r}: {why} "
                       f"(top error: {state.top_error()}); run stopped")  # fmt: skip
        return self.reason

    def _rule(self, state: TargetState, now_ns: int) -> str | None:
        rules = self.rules
        if rules.first and not state.ok_seen and state.failures >= rules.first:
            return f"the first {state.failures} requests all failed"
        n = len(state.window)
        if (
            rules.window
            and n >= max(rules.min_count, 1)
            and state.failed_in_window * 100 > rules.failed_pct * n
        ):
            return (
                f"{state.failed_in_window} of the last {n} requests failed (more than {rules.failed_pct:g} %)"
            )
        failing_s = (now_ns - state.streak_since_ns) / 1e9
        if rules.dead_after_s and state.streak > 1 and failing_s >= rules.dead_after_s:
            return (f"no request succeeded for {failing_s:.1f} s (--breaker-dead-after {rules.dead_after_s:g}): "
                    f"all {state.streak} since the first failure at {wall_clock(state.streak_since_ns)} failed "
                    f"(first error: {state.streak_error})")  # fmt: skip
        return None


def wall(t_ns: int | None) -> float:
    """A perf_counter timestamp (None: now) as Unix seconds."""
    if t_ns is None:
        return time.time()
    return time.time() - (time.perf_counter_ns() - t_ns) / 1e9


def clock(t: float) -> str:
    """Unix seconds as the local wall-clock time HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(t))


def wall_clock(t_ns: int) -> str:
    return clock(wall(t_ns))


def error_key(record: RequestRecord) -> str:
    """One line: the outcome and the start of the server's text (or the client's reason)."""
    text = " ".join((record.error or "").split())[:ERROR_CHARS]
    return f"{record.outcome}: {text}" if text else record.outcome


# -- glue (Locust is imported only here, and lazily) ----------------------------------------


def trip(environment: Any, runtime: Any, reason: str, why: str = "circuit breaker tripped") -> None:
    """Stop the run: here (local), or by telling the master (worker). ``why`` is the log's
    word for the stop (a refused user-API call stops a run this way too)."""
    if runtime.halted:
        return
    runtime.halted = True  # this node's users send nothing more
    runner = getattr(environment, "runner", None)
    if runner is not None and _is_worker(runner):
        runner.send_message(BREAKER_MESSAGE, {"worker": runner.worker_index, "reason": reason, "why": why})
        return
    stop_run(environment, runtime, reason, why)


def _is_worker(runner: Any) -> bool:
    from locust.runners import WorkerRunner

    return isinstance(runner, WorkerRunner)


def stop_run(environment: Any, runtime: Any, reason: str, why: str = "circuit breaker tripped") -> None:
    """The one console line (stats.mark_invalid logs it), the report's reason, the end."""
    from loadkit.report.redact import redact_text

    reason = redact_text(reason)
    if runtime.stats is not None:
        runtime.stats.mark_invalid(reason)
    else:
        log.error("loadkit: %s", reason)
    if environment is not None and getattr(environment, "runner", None) is not None:
        end_run(environment, why)


def install(environment: Any, runtime: Any) -> None:
    """Master: a worker's breaker stops the whole run (the first one to trip; once)."""

    def handler(environment: Any, msg: Any, **_: Any) -> None:
        if runtime.halted:
            return
        runtime.halted = True
        data = msg.data or {}
        stop_run(
            environment,
            runtime,
            f"{data.get('reason')} (seen by worker {data.get('worker')})",
            str(data.get("why") or "circuit breaker tripped"),
        )

    environment.runner.register_message(BREAKER_MESSAGE, handler)


def on_user_error(user_instance: Any, exception: BaseException, **_: Any) -> None:
    """A user-API call that can never be sent (UserAPIError: the task makes the same bad call
    every time) stops the run with its one line, after Locust's one traceback showing where;
    left alone, a task loop at wait_time 0 logs thousands of tracebacks a second."""
    from loadkit.requestargs import UserAPIError

    if not isinstance(exception, UserAPIError):
        return
    user = getattr(user_instance, "user", user_instance)  # Locust passes the user's TaskSet
    runtime = getattr(getattr(user, "environment", None), "loadkit", None)
    if runtime is None or runtime.halted:
        return
    reason = f"user class {type(user).__name__}: {exception}"
    trip(user.environment, runtime, reason, why="a user-API call was refused")
