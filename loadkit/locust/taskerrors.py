"""Exceptions in the user's own tasks, from Locust into loadkit's stats and sessions.

Locust catches an exception that a task (or ``on_start``) raises, logs it, fires its
``user_error`` event and goes on with the user's next task; at exit any such exception makes
the process exit with ``--exit-code-on-error`` (1). Here every node that runs users counts
each one in the ``task_errors`` section (stats/taskerrors.py), which reaches the master in the
snapshots. ``STOPS`` are the exceptions by which Locust (or loadkit through Locust) stops a
task on purpose: a session they end is ``cancelled``, any other exception is a ``task_error``.
"""

from __future__ import annotations

import time
from typing import Any

from locust import User
from locust.exception import InterruptTaskSet, RescheduleTask, RescheduleTaskImmediately, StopTest, StopUser

STOPS: tuple[type[BaseException], ...] = (StopUser, StopTest, InterruptTaskSet, RescheduleTask,
                                          RescheduleTaskImmediately)  # fmt: skip


def install(environment: Any, runtime: Any) -> None:
    """Count this node's task exceptions (the master runs no users: it sees the workers')."""

    def on_user_error(user_instance: Any, exception: BaseException, tb: Any, **_: Any) -> None:
        sections = runtime.sections
        if sections is None:
            return
        try:
            # A TaskSet fires with itself: the exception is its user's.
            user = (
                user_instance
                if isinstance(user_instance, User)
                else getattr(user_instance, "user", user_instance)
            )
            sections.add_task_error(type(user).__name__, exception, tb, time.time())
        except Exception as exc:  # never into Locust's task loop; the stats path failing is a reason
            if runtime.stats is not None:
                runtime.stats.fail("counting a task exception failed", exc)

    environment.events.user_error.add_listener(on_user_error)
