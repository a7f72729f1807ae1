"""Check a start from the web UI's form before Locust starts anything.

Locust's /swarm handler copies the form into ``parsed_options`` and starts the run; an error
loadkit meets at test start (a scenario path that does not exist, an unreachable target) then
only reaches the log. Here the same form is first applied to a copy of the options and checked
(``Runtime.check_start``); a problem answers the form with Locust's own error reply
(``{"success": false, "message"}``), which the form shows, and the run does not start.

What only the test start can find (pre-flight's refusal, ``--engine auto`` finding nothing)
happens after Locust has answered: its /swarm spawns the start and replies ``success: true``
at once. So a start that passed the check waits, in the reply, for loadkit's test start to
finish (pre-flight is one short request per target); refused, the reply becomes Locust's error
reply with the refusal, and the form stays up showing it instead of switching to a running
test that has already ended.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from flask import Response, g, jsonify, request

log = logging.getLogger("loadkit.webui")

# Form keys Locust handles itself rather than copying into parsed_options by type.
LOCUST_KEYS = ("user_count", "spawn_rate", "host", "run_time", "user_classes", "profile", "shape_class")
# How long the reply waits for the test start to begin (Locust spawns it; a load shape's first
# tick is 1 s away) and then to end (pre-flight: a few short requests, bounded by its timeouts).
BEGIN_WAIT_S = 5.0
END_WAIT_S = 120.0


def form_value(current: Any, key: str, form: Any) -> Any:
    """A form field converted the way Locust's /swarm does it (the type of the value it
    replaces); ValueError when it does not convert."""
    value = form.get(key)
    if isinstance(current, bool):
        return value == "true"
    if current is None:
        return value
    if isinstance(current, list):
        return value.split(",") if "," in value else form.getlist(key)
    return type(current)(value)


def options_from_form(parsed: Any, form: Any) -> Any:
    """A copy of ``parsed`` with the form's values in; the real options stay untouched."""
    options = copy.copy(parsed)
    for key in form:
        if key in LOCUST_KEYS or not hasattr(options, key):
            continue
        try:
            setattr(options, key, form_value(getattr(options, key), key, form))
        except ValueError:
            raise ValueError(
                f"{key}: {form.get(key)!r} is not a {type(getattr(options, key)).__name__}"
            ) from None
    return options


def install_start_check(environment: Any, runtime: Any, base_path: str, idle_states: tuple[str, ...]) -> None:
    """Answer a /swarm post that cannot start with the reason (only when no run is going:
    editing a running test's user count posts the same form). ``runtime`` checks the start
    (``check_start``) and counts the starts (``starts_begun``, ``starts_done``)."""
    web_ui = environment.web_ui

    def check_form() -> Any:
        if request.method != "POST" or request.path != f"{base_path}/swarm":
            return None
        check = getattr(runtime, "check_start", None)  # absent: a runtime that checks nothing
        if check is None or str(getattr(environment.runner, "state", "")) not in idle_states:
            return None
        try:
            # Locust's /swarm applies the form over parsed_options: the check does the same.
            options = options_from_form(environment.parsed_options, request.form)
            problem = check(options, request.form.get("host") or environment.host)
        except ValueError as exc:
            problem = str(exc)
        except Exception:  # a bug in the check must not keep anyone from starting a run
            log.exception("loadkit web UI: checking the start form failed; starting anyway")
            return None
        if problem is None:
            g.loadkit_starts = runtime.starts_done  # the reply waits for this start (after_swarm)
            return None
        log.error("loadkit: the run was not started: %s", problem)
        runtime.start_error = problem
        return jsonify({"success": False, "message": f"loadkit: {problem}", "host": environment.host})

    web_ui.app.before_request(check_form)

    def after_swarm(response: Response) -> Response:
        before = g.pop("loadkit_starts", None)
        if before is None or not (response.get_json(silent=True) or {}).get("success"):
            return response
        error = wait_for_start(runtime, before)
        if error is None:
            return response
        return jsonify({"success": False, "message": f"loadkit: {error}", "host": environment.host})

    web_ui.app.after_request(after_swarm)


def wait_for_start(runtime: Any, before: int) -> str | None:
    """The error of the test start that follows a /swarm reply, once it is done (None: it
    started, or it did not begin in time, e.g. a master without workers, which Locust logs)."""
    import gevent

    began = time.monotonic()
    while runtime.starts_done == before:
        waited = time.monotonic() - began
        if waited > END_WAIT_S or (waited > BEGIN_WAIT_S and runtime.starts_begun == before):
            return None
        gevent.sleep(0.02)
    return runtime.start_error
