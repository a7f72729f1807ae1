"""Whether a run's figures can be trusted, and if not, why: the report's ``invalid_reasons``.

A run is invalid when something was marked so during it (a circuit breaker stopped it, a
plugin raised), when loadkit's own stats path failed, when conservation does not hold, when
a worker was lost, when a target had no ok request, or when a target's failed share passes
the threshold (``--max-failed-share``; requests the test cancelled are not failures). Each
reason is one sentence a user can act on; the first is the main one.
"""

from __future__ import annotations

from typing import Any

from loadkit.stats import taskerrors
from loadkit.stats.messages import format_message, top_messages

DEFAULT_MAX_FAILED_SHARE = 0.5

# Process exit codes (docs/reports.md): 0 valid and nothing failed; 1 valid but some requests
# failed or a task raised (Locust's --exit-code-on-error); 2 the run could not start (bad
# option, scenario, target); 3 the run is invalid (invalid_reasons says why).
EXIT_ON_ERROR = 1  # Locust's default --exit-code-on-error
EXIT_CONFIG_ERROR = 2
EXIT_INVALID = 3


def failed_share(section: dict[str, Any]) -> float | None:
    """failures / (requests − cancelled); None when no request counts."""
    judged = section["requests"] - section.get("cancelled", 0)
    return section["failures"] / judged if judged > 0 else None


def _first_message(section: dict[str, Any]) -> str:
    rows = top_messages(section, per_outcome=1)
    return f"; most frequent: {format_message(*rows[0], width=200)}" if rows else ""


def engine_reasons(engine: str, section: dict[str, Any], max_failed_share: float) -> list[str]:
    """A target with requests but no ok one, or whose failed share passes the threshold."""
    requests, cancelled = section["requests"], section.get("cancelled", 0)
    if requests and not section["ok"]:
        if cancelled == requests:
            return [f"target {engine}: no request finished: all {requests} were cancelled by the stop"]
        return [f"target {engine}: no request succeeded (0 ok of {requests}){_first_message(section)}"]
    share = failed_share(section)
    if share is not None and share > max_failed_share:
        return [f"target {engine}: {100 * share:.1f}% of requests failed ({section['failures']} of "
                f"{requests - cancelled}; threshold {100 * max_failed_share:g}%, --max-failed-share)"
                f"{_first_message(section)}"]  # fmt: skip
    return []


def invalid_reasons(*, marked: list[str], errors: list[str], conservation: dict[str, Any],
                    lost: list[dict[str, Any]], engines: dict[str, dict[str, Any]], stopped: bool,
                    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE) -> list[str]:  # fmt: skip
    """Every reason the run is invalid, the ones named during the run first."""
    reasons = list(dict.fromkeys(marked))
    if errors:
        reasons.append(f"loadkit's stats path failed ({len(errors)} error(s), see errors): {errors[0]}")
    if not conservation["holds"]:
        reasons.append(f"conservation does not hold: scheduled {conservation['scheduled']}, sent "
                       f"{conservation['sent']}, dropped {conservation['dropped']}, outcomes "
                       f"{conservation['outcomes_total']}")  # fmt: skip
    for w in lost:
        reasons.append(f"worker {w['index']} lost: {w['lost_reason']}")
    for engine, section in engines.items():
        reasons += engine_reasons(engine, section, max_failed_share)
    if stopped and not engines:
        reasons.append("no request was sent")
    return reasons


def exit_summary(report: dict[str, Any], code_on_error: int = EXIT_ON_ERROR, other_failed: int = 0) -> str:
    """The exit code a headless run ends with for ``report``, and why, in one line. Locust's own
    rule gives ``code_on_error`` for any failed request in its table or any exception in a task;
    loadkit names which: ``other_failed`` counts the failed requests in Locust's table that are
    not loadkit's (a locustfile's own HTTP calls)."""
    if not report.get("valid", True):
        n = len(report.get("invalid_reasons") or [])
        return f"exit code {EXIT_INVALID}: the run is invalid ({n} reason{'s' if n != 1 else ''}: see invalid_reasons)"
    failed = sum(s["failures"] for s in report["engines"].values())
    raised = taskerrors.total(report)
    why = []
    if failed:
        why.append(f"{failed} request{'s' if failed != 1 else ''} failed")
    if other_failed:
        why.append(f"{other_failed} of the locustfile's own (non-LLM) requests failed in Locust's table")
    if raised:
        why.append(f"{raised} exception{'s were' if raised != 1 else ' was'} raised in the locustfile's tasks "
                   f"({taskerrors.summary_text(report)})")  # fmt: skip
    if not why:
        return "exit code 0: the run is valid and nothing failed"
    only_tasks = raised and not failed and not other_failed
    return (f"exit code {code_on_error} (Locust's --exit-code-on-error): the run is valid, but "
            f"{' and '.join(why)}{'; no request failed' if only_tasks else ''}")  # fmt: skip
