"""Sequence lengths (prompt + output tokens) from the files loadkit meets, plus prefix sharing.

Sources: a finished run's raw log (one file, or the report directory holding one or more; names
and reader in loadkit/stats/rawlog.py), an Azure LLM trace CSV, a ShareGPT lengths CSV, a Mooncake JSONL and
a scenario TOML. Lines that cannot be used are counted by reason, never dropped silently.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.sample import LengthSample, PrefixSharing, length_stats
from loadkit.capacity.scenario import lengths_from_scenario
from loadkit.stats.rawlog import RAW_LOG_GLOB, raw_log_paths, read_blocks

__all__ = [
    "MOONCAKE_BLOCK_TOKENS", "LengthSample", "PrefixSharing", "from_list", "length_stats", "lengths_from_scenario",
    "read_lengths",
]  # fmt: skip

MOONCAKE_BLOCK_TOKENS = 512  # the trace's hash ids each name one 512-token block

# (input column, output column, kind) for the CSV layouts recognised by their header.
_CSV_COLUMNS = (
    ("ContextTokens", "GeneratedTokens", "azure"),
    ("num_prefill_tokens", "num_decode_tokens", "sharegpt"),
    ("input_tokens", "output_tokens", "csv"),
    ("n_in", "n_out", "csv"),
)


def from_list(lengths: Sequence[int] | np.ndarray, source: str = "a list") -> LengthSample:
    arr = np.asarray(lengths, dtype=np.int64)
    if arr.ndim != 1 or (arr < 0).any():
        raise CapacityError(f"{source}: lengths must be a flat list of non-negative integers")
    return LengthSample(arr, source, "inline")


def read_lengths(path: str | Path, max_requests: int = 10_000, on_bad_row: str = "refuse") -> LengthSample:
    """Lengths from any supported file, recognised by suffix and then by content.

    Traces go through the replay's own reader (loadkit.workload.tracereader), with its policy
    for bad rows: refused by default, or (``on_bad_row="skip"``) dropped and counted."""
    p = Path(path)
    if p.is_dir():
        return _raw_log_dir(p)
    if not p.is_file():
        p = _shipped_scenario(p)
    suffix = p.suffix.lower()
    if suffix == ".toml":
        return lengths_from_scenario(p, max_requests)
    if suffix == ".csv":
        return _read_csv(p, on_bad_row)
    if suffix in (".jsonl", ".json", ".ndjson"):
        return _read_jsonl(p, on_bad_row)
    raise CapacityError(f"{p}: unknown lengths file type (expected .jsonl, .csv, .toml or a report dir)")


def _shipped_scenario(p: Path) -> Path:
    """A name that is no file may be a shipped scenario's (``--lengths-from azure_conversation_replay``)."""
    from loadkit.workload.errors import ScenarioError
    from loadkit.workload.shipped import find_scenario

    try:
        found = find_scenario(p)
    except ScenarioError:
        found = p
    if not found.is_file():
        raise CapacityError(
            f"lengths file {str(p)!r}: no such file or directory, "
            "nor a shipped scenario's name (`loadkit scenarios list`)"
        )
    return found


# --- JSON lines: a run's raw log or a Mooncake trace ---------------------------------------


def _raw_log_dir(folder: Path) -> LengthSample:
    files = raw_log_paths(folder)
    if not files:
        raise CapacityError(f"{folder}: no {RAW_LOG_GLOB} raw log in this directory (run with --raw-log)")
    acc = _RawLogAccumulator()
    for f in files:
        for obj in _json_lines(f, acc.skipped):
            acc.add(obj)
    return acc.sample(str(folder))


def _json_lines(path: Path, skipped: Counter[str]) -> Iterator[dict[str, Any]]:
    """The file's JSON objects, streamed by the raw-log reader (a raw log's or a trace's lines)."""
    try:
        for rows, bad in read_blocks(path):
            if bad:
                skipped["malformed line"] += bad
            yield from rows
    except OSError as exc:
        raise CapacityError(f"{path}: cannot read: {exc}") from None


def _read_jsonl(path: Path, on_bad_row: str) -> LengthSample:
    skipped: Counter[str] = Counter()
    objects = _json_lines(path, skipped)
    first = next(objects, None)
    if first is None:
        raise CapacityError(f"{path}: no JSON objects in this file")
    if "input_length" in first and "output_length" in first:
        return _mooncake(path, on_bad_row)
    if not ("n_in" in first or "outcome" in first):
        keys = ", ".join(sorted(first)[:8])
        raise CapacityError(
            f"{path}: not a raw log (n_in, n_out, outcome) or Mooncake trace (input_length, output_length); keys: {keys}"
        )
    acc = _RawLogAccumulator(skipped)
    acc.add(first)
    for obj in objects:
        acc.add(obj)
    return acc.sample(str(path))


def _trace(path: Path, fmt: str, columns: tuple[str | None, str, str] | None, on_bad_row: str) -> Any:
    from loadkit.workload.tracereader import TraceReadError, read_trace

    try:
        return read_trace(path, fmt, columns, on_bad_row=on_bad_row)
    except TraceReadError as exc:
        raise CapacityError(str(exc)) from None


def _mooncake(path: Path, on_bad_row: str) -> LengthSample:
    """Mooncake: equal hash ids are equal 512-token prefix blocks; unique ids are what is stored."""
    rows = _trace(path, "mooncake", None, on_bad_row)
    lengths = rows.n_in + rows.n_out
    blocks = sum(len(ids) for ids in rows.hash_ids)
    unique = len({h for ids in rows.hash_ids for h in ids})
    prefix = PrefixSharing(
        f"hash_ids ({MOONCAKE_BLOCK_TOKENS}-token blocks)",
        blocks * MOONCAKE_BLOCK_TOKENS,
        unique * MOONCAKE_BLOCK_TOKENS,
        int(lengths.sum()),
    )
    return LengthSample(lengths, str(path), "mooncake", dict(rows.skipped), prefix)


def _as_count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


class _RawLogAccumulator:
    """A raw log: only `ok` requests have both token counts; the rest are counted by outcome."""

    def __init__(self, skipped: Counter[str] | None = None) -> None:
        self.skipped: Counter[str] = skipped if skipped is not None else Counter()
        self.lengths: list[int] = []
        self.prompt = self.cached = 0
        self.cached_seen = False

    def add(self, obj: dict[str, Any]) -> None:
        outcome = obj.get("outcome", "ok")
        if outcome != "ok":
            self.skipped[f"outcome {outcome}"] += 1
            return
        n_in, n_out = _as_count(obj.get("n_in")), _as_count(obj.get("n_out"))
        if n_in is None or n_out is None:
            self.skipped["n_in or n_out not measured"] += 1
            return
        self.lengths.append(n_in + n_out)
        cached = _as_count(obj.get("cached_tokens"))
        self.prompt += n_in
        if cached is not None:
            self.cached += min(cached, n_in)
            self.cached_seen = True

    def sample(self, source: str) -> LengthSample:
        arr = np.asarray(self.lengths, dtype=np.int64)
        prefix = None
        if self.cached_seen:  # the server's own prefix-cache hits: measured sharing, not planned
            total = int(arr.sum())
            prefix = PrefixSharing(
                "server-reported cached_tokens", self.prompt, self.prompt - self.cached, total
            )
        return LengthSample(arr, source, "raw-log", dict(self.skipped), prefix)


# --- CSV: Azure, ShareGPT lengths, or plain input/output columns ----------------------------


def _read_csv(path: Path, on_bad_row: str) -> LengthSample:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CapacityError(f"{path}: cannot read as UTF-8 CSV: {exc}") from None
    names = [h.strip() for h in header]
    cols = next(((i, o, k) for i, o, k in _CSV_COLUMNS if i in names and o in names), None)
    if cols is None:
        wanted = " or ".join(f"{i},{o}" for i, o, _ in _CSV_COLUMNS)
        raise CapacityError(
            f"{path}: line 1 (header): CSV header needs the columns {wanted}; it has {','.join(names)[:80]}"
        )
    in_col, out_col, kind = cols
    # Azure's TIMESTAMP is read (and checked) as replay reads it; other tables have no clock.
    t_col = "TIMESTAMP" if kind == "azure" and "TIMESTAMP" in names else None
    rows = _trace(path, "azure" if t_col else "lengths", (t_col, in_col, out_col), on_bad_row)
    return LengthSample(rows.n_in + rows.n_out, str(path), kind, dict(rows.skipped))
