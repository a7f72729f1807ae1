"""The LLM table: rows per (engine, label), then per (user class, engine, label), built from a
``loadkit.report/1`` document.

Two forms of every row: ``numeric_rows`` keeps the report's numbers untouched (the JSON
endpoint, the CSV, tests), ``display_rows`` formats them for Locust's extended table, whose
cells are plain text. A display key is the numeric row's name for the same figure
(``user_class``, ``failed_outcomes``, ``output_tokens_per_s``; a latency's ``ttft_ms`` cell
holds its ``ttft_ms_p50`` / ``_p90`` / ``_p99``), so the LLM tab's rows (Locust's
``/stats/requests``, ``extended_stats``) and ``/loadkit/stats.json``'s ``rows`` read alike.
Locust's page camel-cases the table structure's keys and the rows' keys the same way.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from loadkit.stats.messages import format_message, top_messages
from loadkit.stats.metrics import LIVE_METRICS
from loadkit.types import CANCELLED, OK

# ttfat_ms: time to first answer token (reasoning models); "-" where no reply had answer text.
LATENCY_METRICS = LIVE_METRICS  # stats/metrics.py
PERCENTILES = ("p50", "p90", "p99")
ALL_LABELS = "*"  # the engine's total row, as in loadkit's stats.csv
ALL_CLASSES = "*"  # a row over every user class

TTFT_TITLE = "TTFT ms p50 / p90 / p99 (first token, reasoning included)"
TTFAT_TITLE = "TTFAT ms p50 / p90 / p99 (first answer token)"
# (key, title) of the extended table's columns, in order.
TABLE_STRUCTURE: list[dict[str, str]] = [
    {"key": "user_class", "title": "User class"},
    {"key": "engine", "title": "Engine"},
    {"key": "label", "title": "Label"},
    {"key": "requests", "title": "Requests"},
    {"key": "failures", "title": "Failures"},
    {"key": "cancelled", "title": "Cancelled"},
    {"key": "failed_outcomes", "title": "Failures by outcome"},
    {"key": "messages", "title": "Top server messages"},
    # TTFT is the first token of any channel: against a reasoning model, the first reasoning
    # token; TTFAT, the first answer token, is what the user waits for (issue 31).
    {"key": "ttft_ms", "title": TTFT_TITLE},
    {"key": "ttfat_ms", "title": TTFAT_TITLE},
    {"key": "tpot_ms", "title": "TPOT ms p50 / p90 / p99"},
    {"key": "itl_ms", "title": "ITL ms p50 / p90 / p99"},
    {"key": "e2e_ms", "title": "E2E ms p50 / p90 / p99"},
    {"key": "output_tokens_per_s", "title": "Output tok/s"},
    {"key": "goodput_per_s", "title": "Goodput req/s"},
]


def numeric_row(
    engine: str, label: str, section: dict[str, Any], user_class: str = ALL_CLASSES
) -> dict[str, Any]:
    """One row of report numbers; None where the report says "not measured"."""
    row: dict[str, Any] = {
        "user_class": user_class,
        "engine": engine,
        "label": label,
        "requests": section["requests"],
        "ok": section["ok"],
        # Requests the test stopped are cancelled, not failed (reports before the field: derived).
        "failures": section["failures"]
        - (0 if "cancelled" in section else section["outcomes"].get(CANCELLED, 0)),
        "cancelled": section["outcomes"].get(CANCELLED, 0),
        "failed_outcomes": {k: v for k, v in section["outcomes"].items() if k not in (OK, CANCELLED) and v},
        "messages": [{"outcome": o, "count": n, "message": m} for o, n, m in top_messages(section, 3)],
        "output_tokens": section["output_tokens"],
        "output_tokens_per_s": section["output_tokens_per_s"],
        "goodput_per_s": section["goodput_per_s"],
    }
    for metric in LATENCY_METRICS:
        for p in PERCENTILES:
            row[f"{metric}_{p}"] = (section.get(metric) or {}).get(p)  # absent from older reports
    return row


def numeric_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per engine its total row (label "*"), then one row per label when it has several; then
    the same per user class (user class "*" on the rows over every class)."""
    rows = []
    for engine, section in report["engines"].items():
        rows.extend(_engine_rows(engine, section, ALL_CLASSES))
    for user_class, section in (report.get("user_classes") or {}).items():
        for engine, sub in section.get("engines", {}).items():
            rows.extend(_engine_rows(engine, sub, user_class))
    return rows


def _engine_rows(engine: str, section: dict[str, Any], user_class: str) -> list[dict[str, Any]]:
    rows = [numeric_row(engine, ALL_LABELS, section, user_class)]
    labels = section.get("labels", {})
    if len(labels) > 1:
        rows.extend(numeric_row(engine, label, sub, user_class) for label, sub in labels.items())
    return rows


def fmt_number(value: float | None, digits: int = 1) -> str:
    """A fixed-point string; "-" for not measured (never 0)."""
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_triple(row: dict[str, Any], metric: str) -> str:
    return " / ".join(fmt_number(row[f"{metric}_{p}"]) for p in PERCENTILES)


def fmt_outcomes(outcomes: dict[str, int]) -> str:
    """Failed outcomes, most frequent first: "http_error:503 ×4, timeout_total ×1"."""
    ordered = sorted(outcomes.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{name} ×{n}" for name, n in ordered) or "-"


def fmt_messages(messages: list[dict[str, Any]], width: int = 160) -> str:
    """The server's words: "http_error:422 ×4941: {"detail": ...} | ..."; "-" when none."""
    parts = [format_message(m["outcome"], m["count"], m["message"], width) for m in messages]
    return " | ".join(parts) or "-"


def display_row(row: dict[str, Any]) -> dict[str, Any]:
    """The text Locust's extended table shows for one numeric row."""
    out = {
        "user_class": row["user_class"],
        "engine": row["engine"],
        "label": row["label"],
        "requests": row["requests"],
        "failures": row["failures"],
        "cancelled": row["cancelled"],
        "failed_outcomes": fmt_outcomes(row["failed_outcomes"]),
        "messages": fmt_messages(row["messages"]),
        "output_tokens_per_s": fmt_number(row["output_tokens_per_s"]),
        "goodput_per_s": fmt_number(row["goodput_per_s"], 2),
    }
    for metric in LATENCY_METRICS:
        out[metric] = fmt_triple(row, metric)
    return out


def display_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [display_row(r) for r in rows]


CSV_FIELDS = (
    [
        "user_class",
        "engine",
        "label",
        "requests",
        "ok",
        "failures",
        "cancelled",
        "failed_outcomes",
        "output_tokens",
    ]
    + [f"{m}_{p}" for m in LATENCY_METRICS for p in PERCENTILES]
    + ["output_tokens_per_s", "goodput_per_s"]
)


def rows_csv(rows: list[dict[str, Any]]) -> str:
    """The table as CSV: full precision, empty cell for not measured, outcomes as k=v;k=v."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = {k: "" if row[k] is None else row[k] for k in CSV_FIELDS}
        cells["failed_outcomes"] = ";".join(f"{k}={v}" for k, v in sorted(row["failed_outcomes"].items()))
        writer.writerow(cells)
    return buf.getvalue()
