"""The text Locust's failure table shows for a request that did not end ok.

Locust keys its table by the error's ``repr``: the outcome alone (``http_error:422``) hid what
the server said, so the text carries the server's message too (``http_error:422: {"detail":
...}``), shortened as in loadkit's report. Messages that differ only in numbers and ids are one
row, shown as their template (stats/msgtemplate.py: ``requested <n> tokens``), as loadkit's
report groups them. Locust keeps one row per distinct text for ever, so a process hands it at
most MAX_DISTINCT distinct templates; after that a failure shows its outcome and points to
loadkit's report, which counts every message (bounded too).
"""

from __future__ import annotations

from loadkit.records import RequestRecord
from loadkit.stats.messages import failure_message
from loadkit.stats.msgtemplate import template_of

MAX_DISTINCT = 100


class RequestOutcomeError(Exception):
    """What Locust's failure table shows for a request whose outcome is not ok."""

    def __init__(self, outcome: str, message: str | None = None) -> None:
        super().__init__(outcome if message is None else f"{outcome}: {message}")
        self.outcome, self.message = outcome, message

    def __repr__(self) -> str:  # Locust's table and its console error report use repr()
        return str(self.args[0])


class FailureTexts:
    """This process's distinct failure texts for Locust, bounded (see the module docstring)."""

    def __init__(self, limit: int = MAX_DISTINCT) -> None:
        self.limit = limit
        self.seen: set[tuple[str, str]] = set()

    def error_for(self, record: RequestRecord) -> RequestOutcomeError:
        key = (record.outcome, template_of(failure_message(record)))
        if key not in self.seen:
            if len(self.seen) >= self.limit:
                return RequestOutcomeError(
                    record.outcome, "(one of many distinct server messages: see loadkit's report)"
                )
            self.seen.add(key)
        return RequestOutcomeError(*key)


FAILURE_TEXTS = FailureTexts()
