"""The report's "Where the time goes" section: the server-side breakdown per engine (issue 26).

Reads ``engines.<name>.server_breakdown`` of report.json (loadkit.stats.breakdown): a table of
p50/p90/p99 per stage, a stacked bar of the stages' means and medians per engine, and which
stage dominates TTFT and E2E. Engines whose server reported no timings are named so.
"""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import not_measured, note, num, pct, section, table
from loadkit.report.svg import Bars, bar_plot, color

TITLE = "Where the time goes: server-side breakdown"
ROWS = (("queue_ms", "queue"), ("load_ms", "model load"), ("prefill_ms", "prefill"), ("decode_ms", "decode"),
        ("decode_per_token_ms", "decode per token"), ("residual_ttft_ms", "TTFT − server (network + client)"),
        ("server_total_ms", "server total"))  # fmt: skip
# Stacked bar: the stages that add up to E2E (decode per token and the total are not parts).
PARTS = (("queue_ms", "queue"), ("load_ms", "model load"), ("prefill_ms", "prefill"),
         ("residual_ttft_ms", "network + client (TTFT)"), ("decode_ms", "decode"))  # fmt: skip


def _breakdowns(report: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    return {name: s.get("server_breakdown") for name, s in (report.get("engines") or {}).items()}


def _dominant_text(b: dict[str, Any]) -> str:
    dom = b.get("dominant") or {}
    parts = []
    for key, label in (("ttft", "TTFT"), ("e2e", "E2E")):
        d = dom.get(key)
        if d:
            parts.append(f"{label}: {d['meaning']} ({pct(d['share'], 0)} of the reported stages' mean)")
    return "; ".join(parts) or "no stage reported"


def _table(reported: dict[str, dict[str, Any]]) -> str:
    rows = []
    for engine, b in reported.items():
        for key, label in ROWS:
            s = b["stages"].get(key)
            cells = (
                [num(s[q], 2) for q in ("mean", "p50", "p90", "p99")] if s else ["not reported"] + [""] * 3
            )
            rows.append([engine, label, *cells])
    return table(("engine", "stage", "mean ms", "p50 ms", "p90 ms", "p99 ms"), rows)


def _plot(reported: dict[str, dict[str, Any]]) -> str:
    cats = [f"{e} {stat}" for e in reported for stat in ("mean", "median")]
    groups = []
    for i, (key, label) in enumerate(PARTS):
        values: list[float | None] = []
        for b in reported.values():
            s = b["stages"].get(key)
            values += [s["mean"], s["p50"]] if s else [None, None]
        if any(v is not None for v in values):
            groups.append(Bars(label, values, color(i)))
    return bar_plot("server-breakdown", "Stage times per request, stacked (mean and median)", cats, groups,
                    "ms", stacked=True)  # fmt: skip


def breakdown_section(report: dict[str, Any]) -> str:
    """The whole section, self-contained: table, stacked plot, dominant stages, engines without."""
    all_b = _breakdowns(report)
    reported = {e: b for e, b in all_b.items() if b and b.get("stages")}
    silent = [e for e, b in all_b.items() if not (b and b.get("stages"))]
    if not reported:
        why = "no engine reported per-request timings" if all_b else "no engines in this report"
        return section("breakdown", TITLE, not_measured("server breakdown", why))
    lines = [f"{e}: {_dominant_text(b)} · {b['requests_reported']:,} requests reported, "
             f"{b['requests_not_reported']:,} not; source {', '.join(b.get('sources') or {}) or '—'}"
             for e, b in reported.items()]  # fmt: skip
    parts = [_plot(reported), _table(reported), *(note(line) for line in lines)]
    if silent:
        parts.append(not_measured("server breakdown", "not reported by " + ", ".join(silent)))
    parts.append(note("Prefill is compute-bound, decode memory-bound, queueing a capacity limit; the medians "
                      "of the stages need not add up to the median E2E."))  # fmt: skip
    return section("breakdown", TITLE, *parts)
