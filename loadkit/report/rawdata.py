"""The run's raw logs (``requests*.jsonl``) as numpy columns, read as a stream.

Only the columns the report and compare need are kept, so 100k lines cost a few MB. A line
that does not parse (a crash can truncate the last one) is counted and reported, not hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

FLOAT_COLUMNS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "n_in", "n_out", "turn")
NS_COLUMNS = ("t_send_ns", "t_first_ns", "t_end_ns")
TEXT_COLUMNS = ("engine", "label", "outcome", "stage")
CHUNK_LINES = 8192


@dataclass
class RawData:
    """Columns of every raw-log row; floats are NaN where the log had null."""

    files: list[str] = field(default_factory=list)
    malformed: int = 0
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.columns.get("engine", ()))

    def mask(self, engine: str | None = None, ok_only: bool = True) -> np.ndarray:
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
        return sorted(set(self.columns.get("engine", np.array([], dtype=object)).tolist()))


def raw_log_paths(report_dir: str | Path) -> list[Path]:
    return sorted(Path(report_dir).glob("requests*.jsonl"))


def _chunks(path: Path) -> Iterator[list[bytes]]:
    with open(path, "rb") as f:
        chunk: list[bytes] = []
        for line in f:
            if line.strip():
                chunk.append(line)
            if len(chunk) >= CHUNK_LINES:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def _parse(chunk: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    try:  # one orjson call for the whole chunk is several times faster than one per line
        rows = orjson.loads(b"[" + b",".join(chunk) + b"]")
    except orjson.JSONDecodeError:
        return _parse_lines(chunk)
    if all(isinstance(row, dict) for row in rows):
        return rows, 0
    return _parse_lines(chunk)


def _parse_lines(chunk: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    rows, bad = [], 0
    for line in chunk:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else np.nan


def _collect(rows: Iterable[dict[str, Any]], out: dict[str, list[Any]]) -> None:
    for row in rows:
        for name in FLOAT_COLUMNS + NS_COLUMNS:
            out[name].append(_num(row.get(name)))
        for name in TEXT_COLUMNS:
            value = row.get(name)
            out[name].append(None if value is None else str(value))


def read_raw_logs(paths: Iterable[str | Path]) -> RawData:
    """Stream every file in ``paths`` into one RawData (``worker`` kept per row)."""
    data = RawData()
    lists: dict[str, list[Any]] = {n: [] for n in FLOAT_COLUMNS + NS_COLUMNS + TEXT_COLUMNS}
    lists["file"] = []
    for index, path in enumerate(paths):
        data.files.append(str(path))
        for chunk in _chunks(Path(path)):
            rows, bad = _parse(chunk)
            data.malformed += bad
            _collect(rows, lists)
            lists["file"].extend([index] * len(rows))
    for name, values in lists.items():
        if name in TEXT_COLUMNS:
            data.columns[name] = np.array(values, dtype=object)
        elif name == "file":
            data.columns[name] = np.array(values, dtype=np.int32)
        else:
            data.columns[name] = np.array(values, dtype=np.float64)
    return data


def load_raw(report_dir: str | Path) -> RawData | None:
    """The raw logs in ``report_dir``, or None when the run wrote none."""
    paths = raw_log_paths(report_dir)
    return read_raw_logs(paths) if paths else None
