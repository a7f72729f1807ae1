"""Per-second time series (requests, ok, output tokens, in-flight), mergeable by addition.

Rows are keyed by the Unix second (wall clock only labels; the durations come from the
monotonic clock). In-flight is the mean concurrency over each second, i.e. the integral of
the number of open requests over that second. Rather than touching every second a long
request spans, each row keeps how many requests started / ended in it and the sums of their
offsets into the second; the integral follows from prefix sums when the series is read:

    in_flight(s) = open_before(s) + starts(s) − Σ start_offset/1e9 − ends(s) + Σ end_offset/1e9
"""

from __future__ import annotations

from typing import Any

import numpy as np

NS_PER_S = 1_000_000_000
# One day of rows; requests in later seconds are counted as dropped, not stored.
MAX_SECONDS = 86_400

COMPLETED, OK, TOKENS, STARTS, START_OFF, END_OFF = range(6)


class Series:
    __slots__ = ("rows", "dropped", "_dirty", "_sent_dirty")

    def __init__(self) -> None:
        self.rows: dict[int, list[int]] = {}
        self.dropped = 0
        # Seconds changed since the last delta (and in the one before): a worker's periodic
        # snapshot carries only those rows, so its size does not grow with the run's length.
        self._dirty: set[int] = set()
        self._sent_dirty: set[int] = set()

    def _row(self, second: int) -> list[int] | None:
        row = self.rows.get(second)
        if row is None:
            if len(self.rows) >= MAX_SECONDS:
                return None
            row = self.rows[second] = [0, 0, 0, 0, 0, 0]
        self._dirty.add(second)
        return row

    def add_batch(self, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray, tokens: np.ndarray) -> None:
        """Add requests given as int64 arrays of Unix-ns start/end, ok flags and ok-output tokens."""
        ends = np.maximum(ends, starts)
        end_sec = ends // NS_PER_S
        self._accumulate(
            end_sec, {COMPLETED: None, OK: ok, TOKENS: tokens, END_OFF: ends - end_sec * NS_PER_S}
        )
        start_sec = starts // NS_PER_S
        self._accumulate(start_sec, {STARTS: None, START_OFF: starts - start_sec * NS_PER_S})

    def _accumulate(self, seconds: np.ndarray, columns: dict[int, np.ndarray | None]) -> None:
        unique, inverse = np.unique(seconds, return_inverse=True)
        sums = {col: np.bincount(inverse, weights=w, minlength=len(unique)) for col, w in columns.items()}
        for i, second in enumerate(unique.tolist()):
            row = self._row(second)
            if row is None:
                self.dropped += int(sums[next(iter(columns))][i])
                continue
            for col, values in sums.items():
                row[col] += int(values[i])

    def merge(self, other: Series) -> None:
        for second, row in other.rows.items():
            mine = self._row(second)
            if mine is None:
                self.dropped += row[COMPLETED]
                continue
            for i, n in enumerate(row):
                mine[i] += n
        self.dropped += other.dropped

    def to_wire(self) -> list[list[int]]:
        return [[second, *row] for second, row in sorted(self.rows.items())]

    def delta_to_wire(self) -> list[list[int]]:
        """Rows changed since the previous delta, plus those it carried (sent twice, so one
        delta the master never applied costs nothing). Rows are whole cumulative values."""
        seconds = sorted((self._dirty | self._sent_dirty) & self.rows.keys())
        self._sent_dirty, self._dirty = self._dirty, set()
        return [[second, *self.rows[second]] for second in seconds]

    def apply_rows(self, rows: list[list[int]], dropped: int) -> None:
        """Master side: overwrite rows with a newer delta's values."""
        for row in rows:
            self.rows[row[0]] = list(row[1:])
        self.dropped = dropped

    @classmethod
    def from_wire(cls, rows: list[list[int]], dropped: int = 0) -> Series:
        series = cls()
        series.rows = {row[0]: list(row[1:]) for row in rows}
        series.dropped = dropped
        return series

    def columns(self, start_second: int) -> dict[str, list[Any]]:
        """Contiguous columns from the first to the last second seen."""
        cols: dict[str, list[Any]] = {
            k: [] for k in ("t", "unix", "requests", "ok", "output_tokens", "in_flight")
        }
        if not self.rows:
            return cols
        open_before = 0
        for second in range(min(self.rows), max(self.rows) + 1):
            row = self.rows.get(second) or [0, 0, 0, 0, 0, 0]
            in_flight = (open_before + row[STARTS] - row[START_OFF] / NS_PER_S
                         - row[COMPLETED] + row[END_OFF] / NS_PER_S)  # fmt: skip
            open_before += row[STARTS] - row[COMPLETED]
            cols["t"].append(second - start_second)
            cols["unix"].append(second)
            cols["requests"].append(row[COMPLETED])
            cols["ok"].append(row[OK])
            cols["output_tokens"].append(row[TOKENS])
            cols["in_flight"].append(round(in_flight, 3))
        return cols
