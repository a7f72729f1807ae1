"""A trace's rows as the readers collect them: the usable rows (``TraceRows``), the bad ones
refused or counted under one policy (``RowCollector``, ``BadRow``), the token-count check every
format shares (``parse_count``) and the reader's error (``TraceReadError``). Below every format's
reader (``tracereader`` for CSV, ``mooncakerows`` for Mooncake's JSON lines), which build on it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.errors import UserError

_SHOWN_SKIPS = 5  # line numbers kept per read, so a report can point at examples
LONG_GAP_S = 86_400.0  # a silence longer than a day between rows is worth a word (a typo'd year?)


class TraceReadError(ValueError, UserError):
    """A trace file cannot be used; str() names the file, the line and the expectation."""


class BadRow(Exception):
    """One row cannot be used: ``reason`` is the short key it is counted under; ``hint`` what
    the policies do with such a row (the refusal says it)."""

    def __init__(
        self, reason: str, detail: str, hint: str = 'on_bad_row = "skip" drops such rows and counts them'
    ) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.hint = reason, detail, hint


@dataclass(slots=True)
class TraceRows:
    """A trace's usable rows: ``t_s`` in seconds as in the file (not re-based), or None."""

    path: Path
    fmt: str
    n_in: np.ndarray
    n_out: np.ndarray
    t_s: np.ndarray | None
    hash_ids: list[list[int]] | None
    lines: np.ndarray  # the file line each row came from
    order: str = "time"
    out_of_order: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_examples: list[str] = field(default_factory=list)
    padded: int = 0  # Mooncake rows given blocks of their own (on_bad_row = "pad")
    padded_examples: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.n_in)

    def notes(self) -> list[str]:
        """Warnings a user must see: rows out of order, rows skipped or padded, a day-long silence."""
        out = []
        gap = self.longest_gap()
        if gap is not None:
            i, seconds = gap
            out.append(
                f"{self.path}: line {int(self.lines[i + 1])}: {seconds / 86_400:,.1f} days after the row "
                f"before it (line {int(self.lines[i])}); a replay of the whole file sits idle that long "
                "(start_s / end_s pick a window)"
            )
        if self.out_of_order:
            done = (
                'replayed sorted by timestamp (trace.order = "file" keeps the file\'s order)'
                if self.order == "time"
                else 'kept in file order (order = "file"): each is sent no earlier than the row before it'
            )
            out.append(
                f"{self.path}: {self.out_of_order} of {len(self) + sum(self.skipped.values())} rows "
                f"have a timestamp earlier than a row above them; {done}"
            )
        if self.skipped:
            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(self.skipped.items()))
            out.append(
                f'{self.path}: {sum(self.skipped.values())} bad rows skipped (on_bad_row = "skip"; '
                f"{reasons}; e.g. {'; '.join(self.skipped_examples[:3])})"
            )
        if self.padded:
            out.append(
                f"{self.path}: {self.padded} rows have fewer hash_ids than their input_length needs; "
                f'padded with blocks of their own, shared with no other row (on_bad_row = "pad"; '
                f"e.g. {'; '.join(self.padded_examples[:3])})"
            )
        return out

    def longest_gap(self) -> tuple[int, float] | None:
        """(index before it, seconds) of the longest silence between rows in send order, if over
        LONG_GAP_S."""
        if self.t_s is None or len(self.t_s) < 2:
            return None
        gaps = np.diff(self.t_s)
        i = int(np.argmax(gaps))
        return (i, float(gaps[i])) if gaps[i] > LONG_GAP_S else None

    def load_summary(self) -> dict[str, Any]:
        """JSON-ready account of the load, for the report."""
        return {
            "path": str(self.path),
            "format": self.fmt,
            "rows": len(self),
            "order": self.order,
            "out_of_order": self.out_of_order,
            "skipped_bad_rows": dict(self.skipped),
            "skipped_examples": list(self.skipped_examples),
            "padded_short_rows": self.padded,
            "padded_examples": list(self.padded_examples),
        }


class RowCollector:
    """Good rows in file order, and the bad ones counted (or refused) under one policy."""

    def __init__(self, path: Path, on_bad_row: str, timed: bool, hashed: bool) -> None:
        self.path, self.on_bad_row = path, on_bad_row
        self.t: list[float] | None = [] if timed else None
        self.hashes: list[list[int]] | None = [] if hashed else None
        self.n_in: list[int] = []
        self.n_out: list[int] = []
        self.lines: list[int] = []
        self.skipped: Counter[str] = Counter()
        self.examples: list[str] = []
        self.padded: list[tuple[int, int, str]] = []  # (row, blocks needed, detail) for on_bad_row = "pad"

    def add(self, line: int, n_in: int, n_out: int, t: float | None, ids: list[int] | None) -> None:
        self.n_in.append(n_in)
        self.n_out.append(n_out)
        self.lines.append(line)
        if self.t is not None:
            self.t.append(t if t is not None else math.nan)
        if self.hashes is not None:
            self.hashes.append(ids or [])

    def bad(self, line: int, row: BadRow) -> None:
        if self.on_bad_row != "skip":  # "pad" mends short Mooncake rows only (see pad)
            raise TraceReadError(f"{self.path}: line {line}: {row.detail} ({row.hint})")
        self.skipped[row.reason] += 1
        if len(self.examples) < _SHOWN_SKIPS:
            self.examples.append(f"line {line}: {row.detail}")

    def pad(
        self, line: int, needed: int, row: BadRow, n_in: int, n_out: int, t: float, ids: list[int]
    ) -> None:
        """A short row kept whole: its missing block ids are given out in finish()."""
        self.padded.append((len(self.n_in), needed, f"line {line}: {row.detail}"))
        self.add(line, n_in, n_out, t, ids)

    def _give_pad_ids(self) -> None:
        """Ids below every id in the file, one per missing block: text no other row shares."""
        assert self.hashes is not None
        next_id = min((min(ids) for ids in self.hashes if ids), default=0)
        next_id = min(next_id, 0) - 1
        for index, needed, _ in self.padded:
            ids = self.hashes[index] = list(self.hashes[index])
            while len(ids) < needed:
                ids.append(next_id)
                next_id -= 1

    def finish(self, fmt: str, order: str, what: str) -> TraceRows:
        if self.padded:
            self._give_pad_ids()
        if not self.n_in:
            extra = f" ({sum(self.skipped.values())} bad rows skipped)" if self.skipped else ""
            raise TraceReadError(f"{self.path}: expected at least one {what}, found none{extra}")
        rows = TraceRows(
            self.path,
            fmt,
            np.asarray(self.n_in, dtype=np.int64),
            np.asarray(self.n_out, dtype=np.int64),
            None if self.t is None else np.asarray(self.t, dtype=float),
            self.hashes,
            np.asarray(self.lines, dtype=np.int64),
            order,
            0,
            dict(self.skipped),
            self.examples,
            len(self.padded),
            [d for _, _, d in self.padded[:_SHOWN_SKIPS]],
        )
        return _ordered(rows)


def _ordered(rows: TraceRows) -> TraceRows:
    """Count rows earlier than one above them; sort (stable) or keep file order, as asked."""
    t = rows.t_s
    if t is None or len(t) < 2:
        return rows
    running = np.maximum.accumulate(t)
    rows.out_of_order = int(np.count_nonzero(t[1:] < running[:-1]))
    if not rows.out_of_order:
        return rows
    if rows.order == "file":
        rows.t_s = running  # a row is sent no earlier than the one before it: file order is send order
        return rows
    idx = np.argsort(t, kind="stable")
    rows.t_s, rows.n_in, rows.n_out, rows.lines = t[idx], rows.n_in[idx], rows.n_out[idx], rows.lines[idx]
    if rows.hash_ids is not None:
        rows.hash_ids = [rows.hash_ids[i] for i in idx]
    return rows


def parse_count(value: Any, name: str) -> int:
    """A non-negative integer token count (integral floats such as ``12.0`` are accepted)."""
    if isinstance(value, bool):
        raise BadRow("bad token count", f"expected a non-negative integer {name}, got {value!r}")
    number: float | int
    if isinstance(value, int | float):
        number = value
    else:
        try:
            number = float(str(value).strip())
        except ValueError:
            raise BadRow(
                "bad token count", f"expected a non-negative integer {name}, got {value!r}"
            ) from None
    if not math.isfinite(number) or number != int(number):
        raise BadRow("bad token count", f"expected a non-negative integer {name}, got {value!r}")
    if number < 0:
        raise BadRow("negative token count", f"expected a non-negative integer {name}, got {value!r}")
    return int(number)
