"""Check a start from the web UI's form before Locust starts anything.

Locust's /swarm handler copies the form into ``parsed_options`` and starts the run; an error
loadkit meets at test start (a scenario path that does not exist, an unreachable target) then
only reaches the log. Here the same form is first applied to a copy of the options and checked
(``Runtime.check_start``); a problem answers the form with Locust's own error reply
(``{"success": false, "message"}``), which the form shows, and the run does not start.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from flask import jsonify, request

log = logging.getLogger("loadkit.webui")

# Form keys Locust handles itself rather than copying into parsed_options by type.
LOCUST_KEYS = ("user_count", "spawn_rate", "host", "run_time", "user_classes", "profile", "shape_class")


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
            raise ValueError(f"{key}: {form.get(key)!r} is not a {type(getattr(options, key)).__name__}") from None
    return options


def install_start_check(environment: Any, base_path: str, idle_states: tuple[str, ...]) -> None:
    """Answer a /swarm post that cannot start with the reason (only when no run is going:
    editing a running test's user count posts the same form)."""
    web_ui = environment.web_ui

    def check_form() -> Any:
        if request.method != "POST" or request.path != f"{base_path}/swarm":
            return None
        runtime: Any = getattr(environment, "loadkit", None)
        check = getattr(runtime, "check_start", None)
        if check is None or str(getattr(environment.runner, "state", "")) not in idle_states:
            return None
        try:
            options = options_from_form(environment.parsed_options, request.form)
            problem = check(options, request.form.get("host") or environment.host)
        except ValueError as exc:
            problem = str(exc)
        except Exception:  # a bug in the check must not keep anyone from starting a run
            log.exception("loadkit web UI: checking the start form failed; starting anyway")
            return None
        if problem is None:
            return None
        log.error("loadkit: the run was not started: %s", problem)
        runtime.start_error = problem
        return jsonify({"success": False, "message": f"loadkit: {problem}", "host": environment.host})

    web_ui.app.before_request(check_form)
