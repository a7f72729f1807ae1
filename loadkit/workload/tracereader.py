"""One reader per trace format, shared by replay, ``loadkit capacity`` and ``loadkit traces inspect``.

Every problem names the file, the line and what was expected. A bad row (a token count that is
not a non-negative integer, a timestamp that does not parse, a Mooncake line whose hash ids
cover fewer blocks than its input_length needs) is refused by default; with
``on_bad_row="skip"`` it is dropped and counted by reason, so the caller can report it. A
short Mooncake row can instead be padded (``on_bad_row="pad"``, Mooncake only): its missing
blocks get ids of their own, shared with no other row, so the prompt has its input_length.
Rows come back sorted by timestamp (stable) unless ``order="file"``; how many were out of
order is always counted, because a replay in file order of an unsorted trace sends rows at
times they do not belong to.
"""

from __future__ import annotations

import csv
import math
from datetime import datetime
from pathlib import Path

import numpy as np

from loadkit.workload.mooncakerows import read_mooncake
from loadkit.workload.tracerows import (
    LONG_GAP_S,
    BadRow,
    RowCollector,
    TraceReadError,
    TraceRows,
    parse_count,
)

__all__ = [
    "BAD_ROW_POLICIES", "DEFAULT_COLUMNS", "FORMATS", "LONG_GAP_S", "ORDERS", "BadRow", "RowCollector", "TraceReadError",
    "TraceRows", "in_window", "micros", "parse_count", "read_trace",
]  # fmt: skip

FORMATS = ("azure", "mooncake", "lengths")
BAD_ROW_POLICIES = ("refuse", "skip", "pad")  # "pad": Mooncake's short rows only (others refused)
ORDERS = ("time", "file")
DEFAULT_COLUMNS: dict[str, tuple[str | None, str, str]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "lengths": (None, "num_prefill_tokens", "num_decode_tokens"),
    "mooncake": ("timestamp", "input_length", "output_length"),
}


def read_trace(
    path: str | Path,
    fmt: str,
    columns: tuple[str | None, str, str] | None = None,
    *,
    on_bad_row: str = "refuse",
    order: str = "time",
    block_tokens: int = 512,
) -> TraceRows:
    """Read a trace of format ``fmt`` (see FORMATS); TraceReadError on anything unusable.

    ``block_tokens``: Mooncake's tokens per hash id, which decides how many ids a row needs."""
    if fmt not in FORMATS:
        raise TraceReadError(f"{path}: unknown trace format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if on_bad_row not in BAD_ROW_POLICIES or order not in ORDERS or block_tokens < 1:
        raise ValueError(f"on_bad_row {on_bad_row!r} / order {order!r} / block_tokens {block_tokens!r}")
    if on_bad_row == "pad" and fmt != "mooncake":
        raise TraceReadError(
            f'{path}: on_bad_row = "pad" is for Mooncake rows with too few hash_ids; '
            f'format {fmt!r} has no blocks to pad (use "refuse" or "skip")'
        )
    p = Path(path)
    try:
        if fmt == "mooncake":
            return read_mooncake(p, on_bad_row, order, block_tokens)
        return _read_csv(p, fmt, columns or DEFAULT_COLUMNS[fmt], on_bad_row, order)
    except OSError as exc:
        raise TraceReadError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceReadError(f"{p}: expected UTF-8 text: {exc.reason} at byte {exc.start}") from None


# --- token counts and timestamps -------------------------------------------------------------


def micros(t: np.ndarray | float) -> np.ndarray:
    """Seconds as integer microseconds: windows [start_s, end_s) are compared on this grid, so
    a time that float arithmetic puts a hair off a bound is still on the side it was made for."""
    return np.rint(np.asarray(t, dtype=float) * 1e6).astype(np.int64)


def in_window(t: np.ndarray, start_s: float | None, end_s: float | None) -> np.ndarray:
    """Indices of times with start_s <= t < end_s (either bound may be open), in microseconds."""
    us = micros(t)
    keep = np.ones(len(us), dtype=bool)
    if start_s is not None:
        keep &= us >= int(micros(start_s))
    if end_s is not None:
        keep &= us < int(micros(end_s))
    return np.flatnonzero(keep)


class _Clock:
    """Timestamps of one column: plain seconds or ISO date-times, decided by the first row."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.iso: bool | None = None

    def seconds(self, value: str) -> float:
        text = value.strip()
        if self.iso is None:
            self.iso = _number(text) is None
        if not self.iso:
            number = _number(text)
            if number is None:
                raise BadRow(
                    "bad timestamp",
                    f"expected {self.name} as seconds (a number, like the first row's), got {value!r}",
                )
            return number
        try:
            return datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise BadRow(
                "bad timestamp",
                f"expected {self.name} as an ISO date-time (e.g. 2023-11-16 18:15:46.68), got {value!r}",
            ) from None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# --- CSV: Azure and length tables ------------------------------------------------------------


def _read_csv(
    path: Path, fmt: str, columns: tuple[str | None, str, str], on_bad_row: str, order: str
) -> TraceRows:
    t_col, in_col, out_col = columns
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise TraceReadError(f"{path}: expected a header row naming {_names(columns)}, the file is empty")
        where = _column_indices(path, header, columns)
        out = RowCollector(path, on_bad_row, t_col is not None, False)
        clock = _Clock(t_col or "")
        try:
            for cells in reader:
                if not cells or not any(c.strip() for c in cells):
                    continue
                _csv_row(out, reader.line_num, cells, where, (t_col, in_col, out_col), clock)
        except csv.Error as exc:
            raise TraceReadError(f"{path}: line {reader.line_num}: expected CSV: {exc}") from None
    return out.finish(fmt, order, "data row after the header")


def _csv_row(
    out: RowCollector,
    line: int,
    cells: list[str],
    where: tuple[int | None, int, int],
    names: tuple[str | None, str, str],
    clock: _Clock,
) -> None:
    t_i, in_i, out_i = where
    try:
        if max(i for i in where if i is not None) >= len(cells):
            raise BadRow(
                "short row", f"expected {max(i for i in where if i is not None) + 1} cells, got {len(cells)}"
            )
        n_in = parse_count(cells[in_i], names[1])
        n_out = parse_count(cells[out_i], names[2])
        t = None if t_i is None else clock.seconds(cells[t_i])
    except BadRow as row:
        out.bad(line, row)
        return
    out.add(line, n_in, n_out, t, None)


def _column_indices(
    path: Path, header: list[str], columns: tuple[str | None, str, str]
) -> tuple[int | None, int, int]:
    names = [h.strip() for h in header]
    missing = [c for c in columns if c is not None and c not in names]
    if missing:
        if header and all(_number(h) is not None or _is_datetime(h) for h in names if h):
            raise TraceReadError(
                f"{path}: line 1: expected a header row naming {_names(columns)}; line 1 "
                f"({','.join(header)[:60]}) looks like data: the first row of a CSV trace is read as "
                "its header, so add one (or name the columns with input_column / output_column)"
            )
        raise TraceReadError(
            f"{path}: line 1 (header): expected a column named {missing[0]!r}; "
            f"the header has {', '.join(map(repr, names))}"
        )
    t_col, in_col, out_col = columns
    return (None if t_col is None else names.index(t_col)), names.index(in_col), names.index(out_col)


def _is_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _names(columns: tuple[str | None, ...]) -> str:
    return ", ".join(repr(c) for c in columns if c is not None)
