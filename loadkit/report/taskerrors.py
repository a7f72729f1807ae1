"""The report page's "Task errors" section: exceptions raised in the locustfile's own tasks
(report.json ``task_errors``), per user class and kind, with the first traceback of each."""

from __future__ import annotations

import time
from typing import Any

from markupsafe import Markup

from loadkit.report.htmlutil import macro, not_measured, note, num, section, table
from loadkit.report.redact import redact
from loadkit.stats.taskerrors import summary_text, total

HEAD = ("user class", "exception", "message", "count", "first raised (UTC)", "where")


def _when(unix: Any) -> str:
    if not isinstance(unix, (int, float)):
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(unix))


def header_line(report: dict[str, Any]) -> str:
    """For the page header: how many task exceptions and of what ("" when none)."""
    n = total(report)
    if not n:
        return ""
    return (f"{n} exception{'s were' if n != 1 else ' was'} raised in the locustfile's tasks "
            f"({summary_text(report)}): what they would have sent next was not sent.")  # fmt: skip


def task_errors_section(report: dict[str, Any]) -> str:
    errors = report.get("task_errors")
    if errors is None:
        return section("task-errors", "Task errors",
                       not_measured("task-errors", "this report has no task_errors (older loadkit)"))  # fmt: skip
    if not errors:
        return section(
            "task-errors", "Task errors", note("No exception was raised in the locustfile's tasks.")
        )
    rows: list[list[Any]] = []
    tracebacks: list[Markup] = []
    for user_class, s in errors.items():
        for e in s.get("errors", []):
            rows.append([user_class, e["type"], str(redact(e["message"])), num(e["count"]), _when(e.get("first_unix")),
                         e.get("where") or "—"])  # fmt: skip
            tracebacks.append(macro("details", f"{user_class}: {e['type']}: first traceback",
                                    macro("pre", str(redact(e.get("traceback") or "")))))  # fmt: skip
        if s.get("other"):
            rows.append(
                [user_class, "(other kinds)", "kinds past the per-process limit", num(s["other"]), "—", "—"]
            )
    return section("task-errors", "Task errors",
                   note("Exceptions raised by the tasks (or on_start) of each Locust user class, as Locust caught "
                        "them. The requests a task would have sent after raising were never sent, so they are "
                        "in no other table; a session it broke ends as task_error. Locust makes the process "
                        "exit with --exit-code-on-error (1) when any was raised."),
                   table(HEAD, rows, "task-kinds"), *tracebacks)  # fmt: skip
