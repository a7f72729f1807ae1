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

FLOAT_COLUMNS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "n_in", "n_out", "turn", "ttfat_ms")
NS_COLUMNS = ("t_send_ns", "t_first_ns", "t_end_ns")
TEXT_COLUMNS = ("engine", "outcome", "stage")
BLOCK_BYTES = 1 << 22


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


def raw_log_paths(report_dir: str | Path) -> list[Path]:
    return sorted(Path(report_dir).glob("requests*.jsonl"))


def _chunks(path: Path) -> Iterator[list[bytes]]:
    """Lists of non-empty lines, read in blocks (a Python-level loop per line costs more)."""
    with open(path, "rb") as f:
        tail = b""
        while block := f.read(BLOCK_BYTES):
            lines = (tail + block).split(b"\n")
            tail = lines.pop()
            kept = [line for line in lines if line.strip()]
            if kept:
                yield kept
        if tail.strip():
            yield [tail]


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


def _column(rows: list[dict[str, Any]], name: str) -> list[Any]:
    try:  # every loadkit raw-log line has every key: subscripting is faster than .get
        return [row[name] for row in rows]
    except KeyError:
        return [row.get(name) for row in rows]


def _floats(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    values = _column(rows, name)
    try:  # numpy turns None into NaN itself: one C loop instead of one Python call per value
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):  # a string or object where a number belongs: not a number
        return np.array([_num(v) for v in values], dtype=np.float64)


def _texts(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    return np.array(
        [v if v is None or isinstance(v, str) else str(v) for v in _column(rows, name)], dtype=object
    )


def _collect(rows: list[dict[str, Any]], out: dict[str, list[np.ndarray]], file_index: int) -> None:
    for name in FLOAT_COLUMNS + NS_COLUMNS:
        out[name].append(_floats(rows, name))
    for name in TEXT_COLUMNS:
        out[name].append(_texts(rows, name))
    out["file"].append(np.full(len(rows), file_index, dtype=np.int32))


def read_raw_logs(paths: Iterable[str | Path]) -> RawData:
    """Stream every file in ``paths`` into one RawData (the file index kept per row)."""
    data = RawData()
    parts: dict[str, list[np.ndarray]] = {
        n: [] for n in FLOAT_COLUMNS + NS_COLUMNS + TEXT_COLUMNS + ("file",)
    }
    for index, path in enumerate(paths):
        data.files.append(str(path))
        for chunk in _chunks(Path(path)):
            rows, bad = _parse(chunk)
            data.malformed += bad
            if rows:
                _collect(rows, parts, index)
    for name, arrays in parts.items():
        dtype = object if name in TEXT_COLUMNS else np.int32 if name == "file" else np.float64
        data.columns[name] = np.concatenate(arrays) if arrays else np.array([], dtype=dtype)
    return data


def load_raw(report_dir: str | Path) -> RawData | None:
    """The raw logs in ``report_dir``, or None when the run wrote none."""
    paths = raw_log_paths(report_dir)
    return read_raw_logs(paths) if paths else None
