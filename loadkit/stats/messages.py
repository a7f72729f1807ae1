"""What the server said when requests failed: distinct messages per outcome, with counts.

A failed request's ``error`` (the server's status and body, an in-band error, a connect error)
becomes one short message: the ``HTTP <status>:`` prefix dropped (the outcome names the
status), whitespace collapsed, cut at MESSAGE_CHARS. Each node keeps at most KEPT_PER_OUTCOME
distinct messages per outcome of a group; a failure whose message is not kept and does not
fit is counted in ``other``. Merging adds counts, so the totals are exact on every node and
across workers; a message's own count is exact unless some node had no room left for it.
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord

MESSAGE_CHARS = 300
KEPT_PER_OUTCOME = 32  # per node and group: bounds memory and the snapshot's size
TOP = 10  # messages per (engine, outcome) the report lists


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


class MessageCounts:
    """outcome → {message: count} (bounded) and outcome → count of failures not kept."""

    __slots__ = ("kept", "other")

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, int]] = {}
        self.other: dict[str, int] = {}

    def add(self, outcome: str, message: str, n: int = 1) -> None:
        counts = self.kept.get(outcome)
        if counts is None:
            counts = self.kept[outcome] = {}
        if message in counts:
            counts[message] += n
        elif len(counts) < KEPT_PER_OUTCOME:
            counts[message] = n
        else:
            self.other[outcome] = self.other.get(outcome, 0) + n

    def merge(self, other: MessageCounts) -> None:
        for outcome, counts in other.kept.items():
            for message, n in counts.items():
                self.add(outcome, message, n)
        for outcome, n in other.other.items():
            self.other[outcome] = self.other.get(outcome, 0) + n

    def __bool__(self) -> bool:
        return bool(self.kept or self.other)

    def to_wire(self) -> dict[str, Any]:
        return {"kept": {o: [[m, n] for m, n in c.items()] for o, c in self.kept.items()},
                "other": dict(self.other)}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any] | None) -> MessageCounts:
        """From ``to_wire``; None (a snapshot from a loadkit without messages) is empty."""
        out = cls()
        if not data:
            return out
        for outcome, pairs in data["kept"].items():
            out.kept[outcome] = {str(m): int(n) for m, n in pairs}
        out.other = {str(o): int(n) for o, n in data["other"].items()}
        return out

    def section(self, outcomes: dict[str, int], top: int = TOP) -> dict[str, Any]:
        """The report's ``error_messages``: per failed outcome its ``top`` messages, most
        frequent first, and ``other`` = the outcome's count minus those listed (exact)."""
        out: dict[str, Any] = {}
        for outcome in sorted(set(self.kept) | set(self.other)):
            ranked = sorted(self.kept.get(outcome, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            total = outcomes.get(outcome, 0)
            listed = sum(n for _, n in ranked)
            out[outcome] = {"total": total, "top": [{"message": m, "count": n} for m, n in ranked],
                            "other": max(0, total - listed)}  # fmt: skip
        return out


def top_messages(section: dict[str, Any], per_outcome: int = 3) -> list[tuple[str, int, str]]:
    """(outcome, count, message) from a report section's ``error_messages``, the outcomes with
    the most failures first; at most ``per_outcome`` messages each."""
    rows: list[tuple[str, int, str]] = []
    messages = section.get("error_messages") or {}
    for outcome, entry in sorted(messages.items(), key=lambda kv: (-kv[1].get("total", 0), kv[0])):
        for item in entry.get("top", [])[:per_outcome]:
            rows.append((outcome, int(item["count"]), str(item["message"])))
    return rows


def format_message(outcome: str, count: int, message: str, width: int | None = None) -> str:
    """``http_error:422 ×4941: {"detail": ...}``, cut to ``width`` characters when given."""
    text = f"{outcome} ×{count}: {message}"
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text
