"""The report page's "User classes" section: the ``user_classes`` dimension as a table."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import note, num, section, table
from loadkit.report.tables import stat

HEAD = ("user class", "engine", "label", "requests", "ok", "failed", "req/s", "output tok/s", "goodput req/s",
        "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99")  # fmt: skip
CELLS = (("ttft_ms", "p50"), ("ttft_ms", "p90"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p99"),
         ("e2e_ms", "p50"), ("e2e_ms", "p99"))  # fmt: skip


def _row(user_class: str, engine: str, label: str, s: dict[str, Any]) -> list[str]:
    cells = [user_class, engine, label, num(s.get("requests")), num(s.get("ok")),
             num(s.get("failures")), num(s.get("requests_per_s"), 2), num(s.get("output_tokens_per_s")),
             num(s.get("goodput_per_s"), 2)]  # fmt: skip
    return cells + [num(stat(s, m, p)) for m, p in CELLS]


def classes_section(report: dict[str, Any]) -> str:
    classes = report.get("user_classes")
    if not isinstance(classes, dict) or not classes:
        # Not a measurement that failed: reports from runs without user classes have none.
        return section(
            "classes", "Per user class", note("No request in this report names its Locust user class.")
        )
    rows = []
    for user_class, s in classes.items():
        rows.append(_row(user_class, "(all)", "(all)", s))
        for engine, sub in (s.get("engines") or {}).items():
            rows.append(_row(user_class, engine, "(all)", sub))
            for label, lab in (sub.get("labels") or {}).items():
                rows.append(_row(user_class, engine, label, lab))
    return section("classes", "Per user class",
                   note("The same requests as the summary, split by the Locust user class that sent them. "
                        "Latencies in ms over ok requests; ITL is per engine and label only (not kept per class)."),
                   table(HEAD, rows, "summary"))  # fmt: skip
