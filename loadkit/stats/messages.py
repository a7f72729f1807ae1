"""What the server said when requests failed: messages per outcome, grouped by template, with
counts.

A failed request's ``error`` (the server's status and body, an in-band error, a connect error)
becomes one short message: the ``HTTP <status>:`` prefix dropped (the outcome names the
status), whitespace collapsed, cut at MESSAGE_CHARS. Messages are counted by their template
(stats/msgtemplate.py: numbers and ids masked), so "you requested 10914 tokens" and "you
requested 9120 tokens" are one row; each row keeps its count, one example (the earliest by
wall clock, ties broken by the text, so that every merge order picks the same one) and whether
its texts varied. Each node keeps at most KEPT_PER_OUTCOME templates per outcome of a group; a
failure whose template is not kept and does not fit is counted in ``other``. Merging adds
counts, so the totals are exact on every node and across workers; a row's own count is exact
unless some node had no room left for it.
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.msgtemplate import template_of

MESSAGE_CHARS = 300
KEPT_PER_OUTCOME = 32  # per node and group: bounds memory and the snapshot's size
TOP = 10  # messages per (engine, outcome) the report lists
EXAMPLE_MARK = "e.g. "  # before the example of a row whose texts varied, where rows are shown
_LATE = float("inf")  # an example with no time (an older worker's) loses to any with one


def failure_message(record: RequestRecord) -> str:
    """The record's error as one short line, the way the report lists it."""
    text = record.error or ""
    if record.http_status is not None:
        prefix = f"HTTP {record.http_status}:"
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = " ".join(text.split())
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 1] + "…"
    return text or "(no message)"


class Row:
    """One template's count, example and whether its texts varied."""

    __slots__ = ("count", "example", "at_ns", "varied")

    def __init__(self, count: int, example: str, at_ns: float, varied: bool = False) -> None:
        self.count, self.example, self.at_ns, self.varied = count, example, at_ns, varied

    def take(self, count: int, example: str, at_ns: float, varied: bool) -> None:
        self.count += count
        self.varied = self.varied or varied or example != self.example
        if (at_ns, example) < (self.at_ns, self.example):
            self.example, self.at_ns = example, at_ns


class MessageCounts:
    """outcome → {template: Row} (bounded) and outcome → count of failures not kept."""

    __slots__ = ("kept", "other")

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, Row]] = {}
        self.other: dict[str, int] = {}

    def add(self, outcome: str, message: str, n: int = 1, at_ns: float | None = None,
            varied: bool = False, template: str | None = None) -> None:  # fmt: skip
        """Count ``n`` failures with ``message``; ``at_ns``: when (Unix ns) it was seen."""
        counts = self.kept.get(outcome)
        if counts is None:
            counts = self.kept[outcome] = {}
        key = template_of(message) if template is None else template
        when = _LATE if at_ns is None else at_ns
        row = counts.get(key)
        if row is not None:
            row.take(n, message, when, varied)
        elif len(counts) < KEPT_PER_OUTCOME:
            counts[key] = Row(n, message, when, varied)
        else:
            self.other[outcome] = self.other.get(outcome, 0) + n

    def merge(self, other: MessageCounts) -> None:
        for outcome, counts in other.kept.items():
            for template, row in counts.items():
                self.add(outcome, row.example, row.count, row.at_ns, row.varied, template)
        for outcome, n in other.other.items():
            self.other[outcome] = self.other.get(outcome, 0) + n

    def __bool__(self) -> bool:
        return bool(self.kept or self.other)

    def to_wire(self) -> dict[str, Any]:
        return {"kept": {o: [[t, r.count, r.example, None if r.at_ns == _LATE else r.at_ns, r.varied]
                             for t, r in c.items()] for o, c in self.kept.items()},
                "other": dict(self.other)}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any] | None) -> MessageCounts:
        """From ``to_wire``; None (a snapshot from a loadkit without messages) is empty, and an
        older loadkit's [message, count] pairs are grouped here."""
        out = cls()
        if not data:
            return out
        for outcome, rows in data["kept"].items():
            for row in rows:
                if len(row) == 2:  # [message, count]: counted by exact text
                    out.add(str(outcome), str(row[0]), int(row[1]))
                    continue
                template, n, example, at_ns, varied = row
                out.add(str(outcome), str(example), int(n), None if at_ns is None else int(at_ns), bool(varied),
                        str(template))  # fmt: skip
        out.other = {str(o): int(n) for o, n in data["other"].items()}
        return out

    def section(self, outcomes: dict[str, int], top: int = TOP) -> dict[str, Any]:
        """The report's ``error_messages``: per failed outcome its ``top`` templates, most
        frequent first, each with one example ``message``, and ``other`` = the outcome's count
        minus those listed (exact)."""
        out: dict[str, Any] = {}
        for outcome in sorted(set(self.kept) | set(self.other)):
            ranked = sorted(self.kept.get(outcome, {}).items(), key=lambda kv: (-kv[1].count, kv[0]))[:top]
            total = outcomes.get(outcome, 0)
            listed = sum(r.count for _, r in ranked)
            out[outcome] = {"total": total,
                            "top": [{"message": r.example, "count": r.count, "template": t, "varied": r.varied}
                                    for t, r in ranked],
                            "other": max(0, total - listed)}  # fmt: skip
        return out


def top_messages(section: dict[str, Any], per_outcome: int = 3) -> list[tuple[str, int, str]]:
    """(outcome, count, text) from a report section's ``error_messages``, the outcomes with
    the most failures first; at most ``per_outcome`` rows each (text: ``shown``)."""
    rows: list[tuple[str, int, str]] = []
    messages = section.get("error_messages") or {}
    for outcome, entry in sorted(messages.items(), key=lambda kv: (-kv[1].get("total", 0), kv[0])):
        for item in entry.get("top", [])[:per_outcome]:
            rows.append((outcome, int(item["count"]), shown(item)))
    return rows


def shown(item: dict[str, Any]) -> str:
    """A row's text where rows are shown: its example, marked as one when its texts varied."""
    message = str(item["message"])
    return EXAMPLE_MARK + message if item.get("varied") else message


def format_message(outcome: str, count: int, message: str, width: int | None = None) -> str:
    """``http_error:422 ×4941: {"detail": ...}``, cut to ``width`` characters when given."""
    text = f"{outcome} ×{count}: {message}"
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text
