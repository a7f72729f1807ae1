"""Trace files: Azure LLM inference CSV, Mooncake JSONL, plain length CSVs.

A trace loads into column arrays (arrival offsets, input and output lengths, Mooncake's hash
ids) once; prompts are generated lazily per request. Loading the 12k-row Mooncake trace takes
tens of milliseconds (orjson per line).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import orjson

from loadkit.workload.errors import Ctx

FORMATS = ("azure", "mooncake", "lengths")
DEFAULT_COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "lengths": (None, "num_prefill_tokens", "num_decode_tokens"),
}


@dataclass(slots=True)
class Trace:
    """Rows of a trace in file order; ``t_s`` is seconds since the first row, or None."""

    path: Path
    n_in: np.ndarray
    n_out: np.ndarray
    t_s: np.ndarray | None = None
    hash_ids: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.n_in)

    def window(self, start_s: float | None, end_s: float | None) -> Trace:
        """Rows with start_s <= t < end_s, times re-based to the window's start."""
        if self.t_s is None or (start_s is None and end_s is None):
            return self
        lo = 0.0 if start_s is None else start_s
        hi = np.inf if end_s is None else end_s
        keep = np.flatnonzero((self.t_s >= lo) & (self.t_s < hi))
        hashes = [self.hash_ids[i] for i in keep] if self.hash_ids is not None else None
        return Trace(self.path, self.n_in[keep], self.n_out[keep], self.t_s[keep] - lo, hashes)


def load_trace(ctx: Ctx, path: Path, fmt: str, columns: tuple[str | None, str, str]) -> Trace:
    try:
        if fmt == "mooncake":
            return _load_mooncake(str(path))
        return _load_csv(str(path), columns)
    except KeyError as exc:
        raise ctx.error(f"expected a column named {exc.args[0]!r} in {path.name}") from None
    except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise ctx.error(f"expected a {fmt} trace, could not read {path.name}: {exc}") from None


@functools.lru_cache(maxsize=4)
def _load_mooncake(path: str) -> Trace:
    ts, n_in, n_out, hashes = [], [], [], []
    with open(path, "rb") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = orjson.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("hash_ids"), list):
                raise ValueError(f"line {line_no}: expected an object with hash_ids")
            ts.append(float(row["timestamp"]) / 1000.0)
            n_in.append(int(row["input_length"]))
            n_out.append(int(row["output_length"]))
            hashes.append([int(h) for h in row["hash_ids"]])
    if not ts:
        raise ValueError("no rows")
    t = np.asarray(ts)
    return Trace(Path(path), np.asarray(n_in), np.asarray(n_out), t - t.min(), hashes)


@functools.lru_cache(maxsize=8)
def _load_csv(path: str, columns: tuple[str | None, str, str]) -> Trace:
    t_col, in_col, out_col = columns
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in columns:
            if col is not None and col not in header:
                raise KeyError(col)
        rows = list(reader)
    if not rows:
        raise ValueError("no data rows")
    n_in = np.asarray([int(float(r[in_col])) for r in rows])
    n_out = np.asarray([int(float(r[out_col])) for r in rows])
    t_s = None if t_col is None else _times(rows, t_col)
    return Trace(Path(path), n_in, n_out, t_s)


def _times(rows: list[dict[str, str]], col: str) -> np.ndarray:
    """Seconds since the first row: ISO timestamps (Azure) or plain numbers of seconds."""
    first = rows[0][col]
    try:
        float(first)
        t = np.asarray([float(r[col]) for r in rows])
    except ValueError:
        t = np.asarray([datetime.fromisoformat(r[col]).timestamp() for r in rows])
    return t - t.min()


def block_sharing(hash_lists: list[list[int]]) -> tuple[int, int]:
    """(blocks, blocks repeating an earlier block) over hash-id lists in order."""
    seen: set[int] = set()
    total = repeats = 0
    for ids in hash_lists:
        total += len(ids)
        repeats += sum(1 for h in ids if h in seen)
        seen.update(ids)
    return total, repeats


def leading_cached_blocks(hash_lists: list[list[int]]) -> list[int]:
    """Per row, how many leading blocks were already seen in earlier rows (a prefix cache's view)."""
    seen: set[int] = set()
    out = []
    for ids in hash_lists:
        run = 0
        while run < len(ids) and ids[run] in seen:
            run += 1
        out.append(run)
        seen.update(ids)
    return out
