"""Exceptions raised in the user's own tasks: the report's ``task_errors`` section.

A task that raises (a bug in the locustfile, a parse of a reply that failed) sends no request
for what it meant to do next, so the request stats alone cannot show it: the run looks
healthy while the traffic the locustfile describes was never sent. Locust tells every
listener of its ``user_error`` event (loadkit/locust/taskerrors.py); this state counts them per
Locust user class and kind — exception type and message — with the count, where and when the
kind was first seen, and that first traceback. It is a collector section (stats/sections.py),
so workers ship it in their snapshots and the master sums them, lost workers included.

Memory is bounded: a process keeps at most MAX_KINDS kinds per class, later kinds only add to
the class's ``other`` count, so a class's ``count`` is always exact. Nothing here imports
Locust.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

WIRE_VERSION = 1
MAX_KINDS = 20  # distinct (type, message) kinds kept per user class and process
MAX_MESSAGE_CHARS = 300
MAX_TRACEBACK_CHARS = 8_000  # the end is kept: the innermost frames and the message
_SPACE = re.compile(r"\s+")


@dataclass(slots=True)
class Kind:
    """One (exception type, message) of one user class."""

    count: int
    first_unix: float  # when the first one was raised (wall clock): "first" across workers
    where: str  # the innermost frame of that first one: "file.py:12 in task"
    traceback: str  # that first one's traceback, as Python prints it


def type_name(exc: BaseException) -> str:
    """``ValueError``, ``json.decoder.JSONDecodeError``: qualified unless a builtin."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def one_line(exc: BaseException) -> str:
    """The exception's message, whitespace collapsed and cut to MAX_MESSAGE_CHARS."""
    text = _SPACE.sub(" ", str(exc)).strip()
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _where(tb: TracebackType | None) -> str:
    frames = traceback.extract_tb(tb)
    if not frames:
        return ""
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name}"


def _traceback_text(exc: BaseException, tb: TracebackType | None) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return text if len(text) <= MAX_TRACEBACK_CHARS else "…" + text[-(MAX_TRACEBACK_CHARS - 1) :]


class TaskErrors:
    """This node's task exceptions per user class; see the module docstring."""

    def __init__(self) -> None:
        self.classes: dict[str, dict[tuple[str, str], Kind]] = {}
        self.other: dict[str, int] = {}  # per class: exceptions of kinds beyond MAX_KINDS

    def add(self, user_class: str, exc: BaseException, tb: TracebackType | None, wall_unix: float) -> None:
        """One exception raised by a task (or on_start) of a user of ``user_class``."""
        key = (type_name(exc), one_line(exc))
        kinds = self.classes.setdefault(user_class, {})
        kind = kinds.get(key)
        if kind is not None:
            kind.count += 1
        elif len(kinds) < MAX_KINDS:  # the traceback is formatted once per kind, not per exception
            kinds[key] = Kind(1, wall_unix, _where(tb), _traceback_text(exc, tb))
        else:
            self.other[user_class] = self.other.get(user_class, 0) + 1

    def _add_kind(self, user_class: str, key: tuple[str, str], theirs: Kind) -> None:
        kinds = self.classes.setdefault(user_class, {})
        mine = kinds.get(key)
        if mine is None:
            if len(kinds) >= MAX_KINDS:
                self.other[user_class] = self.other.get(user_class, 0) + theirs.count
                return
            kinds[key] = Kind(theirs.count, theirs.first_unix, theirs.where, theirs.traceback)
            return
        if theirs.first_unix < mine.first_unix:  # the earliest one's traceback, whichever node saw it
            mine.first_unix, mine.where, mine.traceback = theirs.first_unix, theirs.where, theirs.traceback
        mine.count += theirs.count

    def merge(self, other: TaskErrors) -> None:
        for user_class, kinds in other.classes.items():
            for key, kind in kinds.items():
                self._add_kind(user_class, key, kind)
        for user_class, n in other.other.items():
            self.classes.setdefault(user_class, {})
            self.other[user_class] = self.other.get(user_class, 0) + n

    @property
    def total(self) -> int:
        return sum(k.count for kinds in self.classes.values() for k in kinds.values()) + sum(
            self.other.values()
        )

    def to_wire(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION,
                "classes": {c: {"other": self.other.get(c, 0),
                                "kinds": [[t, m, k.count, k.first_unix, k.where, k.traceback]
                                          for (t, m), k in kinds.items()]}
                            for c, kinds in self.classes.items()}}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TaskErrors:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"task errors payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        for user_class, section in data["classes"].items():
            kinds = out.classes.setdefault(str(user_class), {})
            for t, m, count, first, where, tb in section["kinds"]:
                kinds[(str(t), str(m))] = Kind(int(count), float(first), str(where), str(tb))
            if int(section["other"]):
                out.other[str(user_class)] = int(section["other"])
        return out

    def report(self) -> dict[str, Any]:
        """Per user class: ``count`` (every exception), ``errors`` (per kind, most frequent
        first) and ``other`` (exceptions of kinds past the per-process limit)."""
        out: dict[str, Any] = {}
        for user_class in sorted(self.classes):
            kinds = sorted(self.classes[user_class].items(), key=lambda kv: (-kv[1].count, kv[1].first_unix))
            other = self.other.get(user_class, 0)
            out[user_class] = {
                "count": sum(k.count for _, k in kinds) + other,
                "errors": [{"type": t, "message": m, "count": k.count, "first_unix": k.first_unix,
                            "where": k.where, "traceback": k.traceback} for (t, m), k in kinds],
                "other": other,
            }  # fmt: skip
        return out


def total(report: dict[str, Any]) -> int:
    """How many task exceptions a report counts (0 for reports without the section)."""
    return sum(int(c.get("count", 0)) for c in (report.get("task_errors") or {}).values())


def summary_text(report: dict[str, Any], most: int = 3) -> str:
    """ "Chat: ZeroDivisionError ×3, KeyError ×1": per class, its most frequent types."""
    parts = []
    for user_class, section in (report.get("task_errors") or {}).items():
        types: dict[str, int] = {}
        for e in section.get("errors", []):
            types[e["type"]] = types.get(e["type"], 0) + e["count"]
        if section.get("other"):
            types["other kinds"] = section["other"]
        ordered = sorted(types.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{t} ×{n}" for t, n in ordered[:most]) + (", …" if len(ordered) > most else "")
        parts.append(f"{user_class}: {shown}")
    return "; ".join(parts)


def console_lines(report: dict[str, Any], per_class: int = 5, width: int = 200) -> list[str]:
    """The console's lines: per class and kind, the count, message and where it was raised."""
    lines = []
    for user_class, section in (report.get("task_errors") or {}).items():
        for e in section.get("errors", [])[:per_class]:
            text = f"{e['type']} ×{e['count']}: {e['message']}"
            text = text if len(text) <= width else text[: width - 1] + "…"
            lines.append(
                f"  {user_class[:16]:<16} {text}" + (f" (at {e['where']})" if e.get("where") else "")
            )
        rest = section["count"] - sum(e["count"] for e in section.get("errors", [])[:per_class])
        if rest:
            lines.append(
                f"  {user_class[:16]:<16} … and {rest} more of other kinds (report.json task_errors)"
            )
    if not lines:
        return []
    return [f"exceptions raised in the locustfile's tasks ({total(report)}; what they would have sent next was "
            "not sent):", *lines]  # fmt: skip
