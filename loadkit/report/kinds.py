"""The report's "Request kinds" section (report.json ``kinds``, stats/kindstats.py): one row per
target and kind, so a run mixing chat, embeddings and rerank shows each kind's latency, rates
and batch sizes apart. Shown when a run sent any kind other than chat."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import note, num, section, table

TITLE = "Request kinds"
HEAD = (
    "target", "kind", "requests", "ok", "failures", "latency p50 ms", "p90", "p99",
    "per item p50 ms", "p90", "p99", "requests/s", "items/s", "input tok/s", "batch mean", "batch p50/p99/max",
)  # fmt: skip


def _rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = (report.get("kinds") or {}).get("rows") or []
    return rows if any(r.get("kind") != "chat" for r in rows) else []


def _failures(row: dict[str, Any]) -> str:
    failures = row.get("failures") or {}
    return ", ".join(f"{k} {v}" for k, v in failures.items()) or "0"


def _batch(row: dict[str, Any]) -> tuple[str, str]:
    b = row.get("batch_size")
    if not b:
        return num(None), num(None)
    return num(b["mean"], 2), f"{b['p50']}/{b['p99']}/{b['max']}"


def _cells(row: dict[str, Any]) -> list[str]:
    lat, per = row.get("latency_ms") or {}, row.get("latency_per_item_ms") or {}
    return [
        row["target"], row["kind"], num(row["requests"], 0), num(row["ok"], 0), _failures(row),
        num(lat.get("p50")), num(lat.get("p90")), num(lat.get("p99")),
        num(per.get("p50"), 2), num(per.get("p90"), 2), num(per.get("p99"), 2),
        num(row.get("requests_per_s"), 2), num(row.get("items_per_s"), 2), num(row.get("input_tokens_per_s")),
        *_batch(row),
    ]  # fmt: skip


def kinds_section(report: dict[str, Any]) -> str:
    """Empty for a chat-only run (its figures are the engine rows)."""
    rows = _rows(report)
    if not rows:
        return ""
    return section(
        "kinds",
        TITLE,
        note(
            "Latency: E2E (send to the body's last byte) of ok requests, every kind; per item: latency / items "
            "(inputs embedded, documents ranked) for requests of two items or more. Rates over the target's "
            "window (every kind's requests), so a target's kinds add up. Input tokens: the server's usage. "
            "The engine rows' E2E and TTFT/TPOT hold streamed (chat) requests only."
        ),
        table(HEAD, [_cells(r) for r in rows]),
    )


def console_lines(report: dict[str, Any]) -> list[str]:
    """One line per target and kind when the run sent any kind but chat."""
    out = []
    for row in _rows(report):
        lat, per = row.get("latency_ms") or {}, row.get("latency_per_item_ms") or {}
        mean, spread = _batch(row)
        out.append(
            f"kind {row['kind']} @ {row['target']}: {row['requests']} req ({row['ok']} ok, failures "
            f"{_failures(row)}), latency p50/p90/p99 {num(lat.get('p50'))}/{num(lat.get('p90'))}/"
            f"{num(lat.get('p99'))} ms, per item p50/p99 {num(per.get('p50'), 2)}/{num(per.get('p99'), 2)} ms, "
            f"{num(row.get('requests_per_s'), 2)} req/s, {num(row.get('items_per_s'), 2)} items/s, "
            f"{num(row.get('input_tokens_per_s'))} input tok/s, batch mean {mean} (p50/p99/max {spread})"
        )
    return out
