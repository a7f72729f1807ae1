"""Per-second time series (requests, ok, output tokens, in-flight), mergeable by addition.

Rows are keyed by the Unix second (wall clock only labels; the durations come from the
monotonic clock). In-flight is the mean concurrency over each second, i.e. the integral of
the number of open requests over that second. Rather than touching every second a long
request spans, each row keeps how many requests started / ended in it and the sums of their
offsets into the second; the integral follows from prefix sums when the series is read:

    in_flight(s) = open_before(s) + starts(s) − Σ start_offset/1e9 − ends(s) + Σ end_offset/1e9

Storage is numpy blocks of CHUNK consecutive seconds (48 bytes a second), not a Python
object per row: a one-hour soak measured ~300 bytes a row as dict-of-lists, which made a
long run's memory grow visibly (docs/performance.md, Soak). A block is allocated when a
second in it is first touched, so a series costs what its seconds cost, ±one block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NS_PER_S = 1_000_000_000
# One day of rows; requests in later seconds are counted as dropped, not stored.
MAX_SECONDS = 86_400
CHUNK = 256  # seconds per block: 12 KiB
MAX_CHUNKS = -(-MAX_SECONDS // CHUNK) + 1  # a day starting mid-block spans one more

COMPLETED, OK, TOKENS, STARTS, START_OFF, END_OFF = range(6)
NCOLS = 6


class Series:
    __slots__ = ("chunks", "dropped", "_dirty", "_sent_dirty", "_tracking")

    def __init__(self) -> None:
        self.chunks: dict[int, np.ndarray] = {}  # second // CHUNK → int64[CHUNK, NCOLS]
        self.dropped = 0
        # Seconds changed since the last delta (and in the one before): a worker's periodic
        # snapshot carries only those rows, so its size does not grow with the run's length.
        self._dirty: set[int] = set()
        self._sent_dirty: set[int] = set()
        # Only a worker sends deltas; a local run never asks, and must not collect dirty
        # seconds for the life of the run. Tracking starts with the first delta (a full one).
        self._tracking = False

    # -- storage --------------------------------------------------------------------------

    def _chunk(self, index: int) -> np.ndarray | None:
        block = self.chunks.get(index)
        if block is None:
            if len(self.chunks) >= MAX_CHUNKS:
                return None
            block = self.chunks[index] = np.zeros((CHUNK, NCOLS), dtype=np.int64)
        return block

    def _add_rows(self, seconds: np.ndarray, values: np.ndarray, count_col: int | None) -> None:
        """values[i] (NCOLS wide) is added to the row of seconds[i] (seconds unique, sorted).
        Rows past the cap are lost; count_col says which column counts them as dropped
        requests (None for the start side, so a request is not counted twice)."""
        if len(seconds) == 0:
            return
        index = seconds // CHUNK
        bounds = np.flatnonzero(np.diff(index)) + 1
        for lo, hi in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(seconds)].tolist(), strict=True):
            block = self._chunk(int(index[lo]))
            if block is None:
                if count_col is not None:
                    self.dropped += int(values[lo:hi, count_col].sum())
                continue
            block[seconds[lo:hi] % CHUNK] += values[lo:hi]
            if self._tracking:
                self._dirty.update(seconds[lo:hi].tolist())

    def _present(self) -> tuple[np.ndarray, np.ndarray]:
        """(seconds, rows) of every second with a start or a completion, in order."""
        if not self.chunks:
            return np.empty(0, np.int64), np.empty((0, NCOLS), np.int64)
        order = sorted(self.chunks)
        rows = np.concatenate([self.chunks[i] for i in order])
        seconds = np.concatenate([np.arange(i * CHUNK, (i + 1) * CHUNK, dtype=np.int64) for i in order])
        keep = (rows[:, COMPLETED] != 0) | (rows[:, STARTS] != 0)
        return seconds[keep], rows[keep]

    def row(self, second: int) -> list[int] | None:
        block = self.chunks.get(second // CHUNK)
        if block is None:
            return None
        r = block[second % CHUNK]
        return r.tolist() if (r[COMPLETED] or r[STARTS]) else None

    def __len__(self) -> int:
        return len(self._present()[0])

    # -- recording ------------------------------------------------------------------------

    def add_batch(self, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray, tokens: np.ndarray) -> None:
        """Add requests given as int64 arrays of Unix-ns start/end, ok flags and ok-output tokens."""
        ends = np.maximum(ends, starts)
        end_sec = ends // NS_PER_S
        self._accumulate(end_sec, {COMPLETED: None, OK: ok, TOKENS: tokens, END_OFF: ends - end_sec * NS_PER_S},
                         COMPLETED)  # fmt: skip
        start_sec = starts // NS_PER_S
        self._accumulate(start_sec, {STARTS: None, START_OFF: starts - start_sec * NS_PER_S}, None)

    def _accumulate(
        self, seconds: np.ndarray, columns: dict[int, np.ndarray | None], count_col: int | None
    ) -> None:
        unique, inverse = np.unique(seconds, return_inverse=True)
        values = np.zeros((len(unique), NCOLS), dtype=np.int64)
        for col, w in columns.items():
            if w is None:
                values[:, col] = np.bincount(inverse, minlength=len(unique))
            else:
                # Integer sums per second without float64 rounding (offsets reach ~1e9 × n).
                np.add.at(values[:, col], inverse, np.asarray(w, dtype=np.int64))
        self._add_rows(unique.astype(np.int64), values, count_col)

    def merge(self, other: Series) -> None:
        seconds, rows = other._present()
        self._add_rows(seconds, rows, COMPLETED)
        self.dropped += other.dropped

    # -- wire -----------------------------------------------------------------------------

    def to_wire(self) -> list[list[int]]:
        seconds, rows = self._present()
        return np.column_stack([seconds, rows]).tolist() if len(seconds) else []

    def delta_to_wire(self) -> list[list[int]]:
        """Rows changed since the previous delta, plus those it carried (sent twice, so one
        delta the master never applied costs nothing). Rows are whole cumulative values.
        The first delta carries every row (dirty seconds were not tracked before it)."""
        if not self._tracking:
            self._tracking = True
            rows = self.to_wire()
            self._sent_dirty = {row[0] for row in rows}  # re-sent with the next delta too
            return rows
        seconds = sorted(self._dirty | self._sent_dirty)
        self._sent_dirty, self._dirty = self._dirty, set()
        out = []
        for second in seconds:
            row = self.row(second)
            if row is not None:
                out.append([second, *row])
        return out

    def apply_rows(self, rows: list[list[int]], dropped: int) -> None:
        """Master side: overwrite rows with a newer delta's values."""
        for row in rows:
            block = self._chunk(row[0] // CHUNK)
            if block is not None:
                block[row[0] % CHUNK] = row[1:]
        self.dropped = dropped

    @classmethod
    def from_wire(cls, rows: list[list[int]], dropped: int = 0) -> Series:
        series = cls()
        series.apply_rows(rows, dropped)
        return series

    # -- reading --------------------------------------------------------------------------

    def columns(self, start_second: int) -> dict[str, list[Any]]:
        """Contiguous columns from the first to the last second seen."""
        names = ("t", "unix", "requests", "ok", "output_tokens", "in_flight")
        seconds, rows = self._present()
        if not len(seconds):
            return {k: [] for k in names}
        first, last = int(seconds[0]), int(seconds[-1])
        dense = np.zeros((last - first + 1, NCOLS), dtype=np.int64)
        dense[seconds - first] = rows
        opened = dense[:, STARTS] - dense[:, COMPLETED]
        open_before = np.concatenate(([0], np.cumsum(opened)[:-1]))
        in_flight = (open_before + opened
                     - dense[:, START_OFF] / NS_PER_S + dense[:, END_OFF] / NS_PER_S)  # fmt: skip
        unix = np.arange(first, last + 1, dtype=np.int64)
        return {
            "t": (unix - start_second).tolist(),
            "unix": unix.tolist(),
            "requests": dense[:, COMPLETED].tolist(),
            "ok": dense[:, OK].tolist(),
            "output_tokens": dense[:, TOKENS].tolist(),
            "in_flight": np.round(in_flight, 3).tolist(),
        }
