"""The run's raw logs as the numpy columns the report and compare need.

Read as a stream by the raw-log module (loadkit/stats/rawlog.py: names, writer, reader); only
these columns are kept, so 100k lines cost a few MB. A line that does not parse (a crash can
truncate the last one) is counted and reported, not hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loadkit.stats.rawlog import raw_log_paths, read_columns

__all__ = ["RawData", "load_raw", "raw_log_paths", "read_raw_logs"]

FLOAT_COLUMNS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "n_in", "n_out", "turn", "ttfat_ms")
NS_COLUMNS = ("t_send_ns", "t_first_ns", "t_end_ns")
TEXT_COLUMNS = ("engine", "outcome", "stage", "kind")


@dataclass
class RawData:
    """Columns of every raw-log row; floats are NaN where the log had null."""

    files: list[str] = field(default_factory=list)
    malformed: int = 0
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    _masks: dict[tuple[str | None, bool], np.ndarray] = field(default_factory=dict, repr=False)
    _engines: list[str] | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        return len(self.columns.get("engine", ()))

    def mask(self, engine: str | None = None, ok_only: bool = True) -> np.ndarray:
        """Rows of ``engine`` (all engines for None), ok outcomes only by default; cached."""
        key = (engine, ok_only)
        if key not in self._masks:
            self._masks[key] = self._mask(engine, ok_only)
        return self._masks[key]

    def _mask(self, engine: str | None, ok_only: bool) -> np.ndarray:
        keep = np.ones(self.rows, dtype=bool)
        if engine is not None:
            keep &= self.columns["engine"] == engine
        if ok_only:
            keep &= self.columns["outcome"] == "ok"
        return keep

    def values(self, column: str, engine: str | None = None, ok_only: bool = True) -> np.ndarray:
        """Finite values of ``column`` for ``engine``'s rows (ok outcomes only by default)."""
        col = self.columns[column][self.mask(engine, ok_only)]
        return col[np.isfinite(col)]

    def engines(self) -> list[str]:
        if self._engines is None:
            found = self.columns.get("engine", np.array([], dtype=object)).tolist()
            self._engines = sorted({e for e in found if e is not None})
        return self._engines


def read_raw_logs(paths: Iterable[str | Path]) -> RawData:
    """Stream every file in ``paths`` into one RawData (the file index kept per row)."""
    read = read_columns(paths, FLOAT_COLUMNS + NS_COLUMNS, TEXT_COLUMNS)
    columns = read.columns
    # A kind answered in one body (no first token) has its latency in the kinds section: the
    # E2E the charts draw is the streamed requests', as the report's (docs/metrics.md).
    kinds, first = columns["kind"], columns["t_first_ns"]
    body = np.fromiter((k is not None and k != "chat" for k in kinds), dtype=bool, count=len(kinds))
    if body.any():
        columns["e2e_ms"] = np.where(body & np.isnan(first), np.nan, columns["e2e_ms"])
    return RawData(files=read.files, malformed=read.malformed, columns=columns)


def load_raw(report_dir: str | Path) -> RawData | None:
    """The raw logs in ``report_dir``, or None when the run wrote none."""
    paths = raw_log_paths(report_dir)
    return read_raw_logs(paths) if paths else None
