"""The console's view of a report: the per-engine table printed during and after a run, and
the final summary (why the run is invalid, what the server said, the tasks' exceptions)."""

from __future__ import annotations

from typing import Any

from loadkit.report.costtiers import console_lines as cost_tier_lines
from loadkit.report.gpu import console_lines as gpu_console_lines
from loadkit.report.images import console_lines as image_lines
from loadkit.stats.breakdown import console_line
from loadkit.stats.messages import format_message, top_messages
from loadkit.stats.taskerrors import console_lines as task_error_lines

__all__ = ["console_table", "delivered_lines", "final_summary", "invalid_lines", "message_lines",
           "stream_end_lines", "task_error_lines"]  # fmt: skip


def delivered_lines(report: dict[str, Any]) -> list[str]:
    from loadkit.stats.delivered import console_lines
    from loadkit.stats.reasoningsplit import console_lines as reasoning_lines
    from loadkit.stats.tenantstats import console_lines as tenant_lines

    by_target = (report.get("lengths") or {}).get("by_target") or {}
    return console_lines(report) + reasoning_lines(by_target) + tenant_lines(report)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def saw_reasoning(report: dict[str, Any]) -> bool:
    """Whether any target's replies had a reasoning channel (time to first answer token measured
    apart from TTFT): then the console shows TTFAT beside TTFT."""
    # A reasoning token seen, or counted by the server (n_reasoning 0 from usage is no reasoning).
    return any(((s.get("ttfrt_ms") or {}).get("count") or 0) > 0 or ((s.get("n_reasoning") or {}).get("max") or 0) > 0
               for s in report["engines"].values())  # fmt: skip


def _triple(s: dict[str, Any], metric: str) -> str:
    return "/".join(_fmt((s.get(metric) or {}).get(p)) for p in ("p50", "p90", "p99"))


def console_table(report: dict[str, Any], title: str = "loadkit") -> str:
    """Per engine: requests, failures, TTFT/TPOT/ITL p50/p90/p99 (ms), output tok/s; TTFAT
    (first answer token) beside TTFT when the run saw reasoning, whose first token TTFT is."""
    metrics = ["ttft_ms", "tpot_ms", "itl_ms"]
    names = ["TTFT", "TPOT", "ITL"]
    reasoning = saw_reasoning(report)
    if reasoning:
        metrics.insert(1, "ttfat_ms")
        names.insert(1, "TTFAT")
    # Requests the test stopped (`cancelled`) are shown apart: the server did not fail them.
    head = f"{'engine':<16} {'reqs':>7} {'fails':>6} {'cancel':>6} " + " ".join(
        f"{name + ' p50/p90/p99 ms':>22}" for name in names) + f" {'tok/s':>9}"  # fmt: skip
    lines = [f"{title}{'' if report['valid'] else '  [INVALID]'}", head, "-" * len(head)]
    for engine, s in report["engines"].items():
        cancelled = s["outcomes"].get("cancelled", 0)
        cells = " ".join(f"{_triple(s, m):>22}" for m in metrics)
        lines.append(f"{engine[:16]:<16} {s['requests']:>7} {s['failures']:>6} {cancelled:>6} {cells} "
                     f"{_fmt(s['output_tokens_per_s']):>9}")  # fmt: skip
    if reasoning:
        lines.append("TTFT: first token of any kind, reasoning included; TTFAT: first answer token (what the user "
                     "waits for); - where no reply had answer text")  # fmt: skip
    lost = report["workers"]["lost"]
    if lost:
        lines.append(f"workers lost: {lost} (see report.json workers.nodes)")
    lines += delivered_lines(report)  # issue 27: asked vs realised arrivals
    lines += breakdown_lines(report)  # issue 26: the server's own timings
    lines += image_lines(report)  # issue 34: images' tokens, TTFT by image count, send time
    lines += gpu_console_lines(report)  # issue 36: GPU energy per token (report/gpu.py)
    lines += invalid_lines(report)
    return "\n".join(lines)


def breakdown_lines(report: dict[str, Any]) -> list[str]:
    return [
        line
        for engine, s in report["engines"].items()
        if (line := console_line(engine, s.get("server_breakdown")))
    ]


def invalid_lines(report: dict[str, Any]) -> list[str]:
    """Why the run is invalid (or stopped), one reason a line."""
    reasons = report.get("invalid_reasons") or []
    if not reasons:
        return []
    return ["run INVALID:", *(f"  - {r}" for r in reasons)]


def stream_end_lines(report: dict[str, Any]) -> list[str]:
    """Targets whose ok streams ended by a clean close, without the protocol's end marker."""
    lines = []
    for engine, s in report["engines"].items():
        closed = (s.get("stream_ends") or {}).get("close", 0)
        if closed:
            lines.append(f"{engine}: {closed} of {s['ok']} ok streams ended by a clean close after the last "
                         "message, without the protocol's end marker (e.g. [DONE])")  # fmt: skip
    return lines


def message_lines(report: dict[str, Any], per_outcome: int = 3, width: int = 200) -> list[str]:
    """What the server said, per target and failed outcome, most frequent first."""
    lines = []
    for engine, s in report["engines"].items():
        for outcome, count, message in top_messages(s, per_outcome):
            lines.append(f"  {engine[:16]:<16} {format_message(outcome, count, message, width)}")
    return ["failed requests, top messages per target and outcome:", *lines] if lines else []


def final_summary(report: dict[str, Any], exit_line: str | None = None) -> str:
    """The console's last word on a run: the table, why it is invalid, what the server said,
    the exceptions the locustfile's tasks raised, and (``exit_line``) the exit code and why."""
    return "\n".join([console_table(report, "loadkit final"), *cost_tier_lines(report), *stream_end_lines(report), *message_lines(report),
                      *task_error_lines(report), *([exit_line] if exit_line else [])])  # fmt: skip
