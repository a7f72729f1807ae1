"""Trace files: Azure LLM inference CSV, Mooncake JSONL, plain length CSVs.

A trace loads into column arrays (arrival offsets, input and output lengths, Mooncake's hash
ids) once; prompts are generated lazily per request. Loading the 12k-row Mooncake trace takes
tens of milliseconds (orjson per line).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.workload.errors import Ctx
from loadkit.workload.tracereader import DEFAULT_COLUMNS, TraceReadError, in_window, read_trace
from loadkit.workload.tracereader import FORMATS as READER_FORMATS

FORMATS = (*READER_FORMATS, "servegen")  # servegen is synthesised from statistics (servegen.py)

__all__ = ["DEFAULT_COLUMNS", "FORMATS", "Trace", "block_sharing", "leading_cached_blocks", "load_trace"]


@dataclass(slots=True)
class Trace:
    """Rows of a trace in send order; ``t_s`` is seconds since the first row, or None.

    ``notes`` are the loader's warnings (rows out of order, bad rows skipped) and ``load`` its
    JSON account; both reach the run's report."""

    path: Path
    n_in: np.ndarray
    n_out: np.ndarray
    t_s: np.ndarray | None = None
    hash_ids: list[list[int]] | None = None
    notes: tuple[str, ...] = ()
    load: dict[str, Any] = field(default_factory=dict)
    # Per row, the share of its output expected to be reasoning (ServeGen's reason_ratio; NaN
    # where its window gives none); None for traces without one.
    reason_ratio: np.ndarray | None = None
    # Per row, the tokens of each of its images (ServeGen's multimodal image_count and
    # image_tokens, servegenmm.py); None for traces without images.
    image_tokens: list[tuple[int, ...]] | None = None

    def __len__(self) -> int:
        return len(self.n_in)

    def window(self, start_s: float | None, end_s: float | None) -> Trace:
        """Rows with start_s <= t < end_s, times re-based to the window's start."""
        if self.t_s is None or (start_s is None and end_s is None):
            return self
        lo = 0.0 if start_s is None else start_s
        keep = in_window(self.t_s, start_s, end_s)
        hashes = [self.hash_ids[i] for i in keep] if self.hash_ids is not None else None
        ratio = None if self.reason_ratio is None else self.reason_ratio[keep]
        images = None if self.image_tokens is None else [self.image_tokens[i] for i in keep]
        t_s = self.t_s[keep] - lo
        return Trace(
            self.path, self.n_in[keep], self.n_out[keep], t_s, hashes, self.notes, self.load, ratio, images
        )


def load_trace(
    ctx: Ctx,
    path: Path,
    fmt: str,
    columns: tuple[str | None, str, str],
    *,
    on_bad_row: str = "refuse",
    order: str = "time",
    block_tokens: int = 512,
) -> Trace:
    """The trace through the shared reader (tracereader.py); its errors become ScenarioErrors."""
    try:
        return _load(str(path), _stamp(path), fmt, columns, on_bad_row, order, block_tokens)
    except TraceReadError as exc:
        raise ctx.error(str(exc)) from None


def load_servegen(ctx: Ctx, path: Path, seed: int, start_s: float | None, end_s: float | None) -> Trace:
    """A ServeGen window synthesised (servegen.py); times stay in the file's seconds, so
    ``window()`` cuts and re-bases them as for any trace."""
    from loadkit.workload import servegen

    try:
        t, n_in, n_out = servegen.synthesise(path, seed, start_s, end_s)
        ratio = servegen.reason_ratios(path, seed, t)
        images = servegen.image_tokens_for(path, seed, t)
    except TraceReadError as exc:
        raise ctx.error(str(exc)) from None
    notes = servegen.notes_for(path)
    load = {
        "path": str(path),
        "format": "servegen",
        "rows": len(t),
        "order": "time",
        "out_of_order": 0,
        "skipped_bad_rows": {},
        "skipped_examples": [],
        "synthesised": True,
    }
    return Trace(path, n_in, n_out, t, None, notes, load, ratio, images)


def _stamp(path: Path) -> tuple[int, int]:
    """(mtime, size): part of the cache key, so a file rewritten in place is read again."""
    try:
        st = path.stat()
    except OSError:
        return (0, 0)  # the reader names the problem
    return (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _load(
    path: str,
    stamp: tuple[int, int],
    fmt: str,
    columns: tuple[str | None, str, str],
    on_bad_row: str,
    order: str,
    block_tokens: int,
) -> Trace:
    rows = read_trace(
        path,
        fmt,
        None if fmt == "mooncake" else columns,
        on_bad_row=on_bad_row,
        order=order,
        block_tokens=block_tokens,
    )
    t_s = None if rows.t_s is None else rows.t_s - rows.t_s.min()
    for note in rows.notes():  # once per process (cached); the run's report repeats it
        logging.getLogger("loadkit").warning("loadkit: %s", note)
    return Trace(
        Path(path), rows.n_in, rows.n_out, t_s, rows.hash_ids, tuple(rows.notes()), rows.load_summary()
    )


def block_sharing(hash_lists: list[list[int]], history: set[int] | None = None) -> tuple[int, int]:
    """(blocks, blocks repeating an earlier block) over hash-id lists in order; ``history`` holds
    blocks seen before the first list (a window's earlier trace)."""
    seen: set[int] = set(history or ())
    total = repeats = 0
    for ids in hash_lists:
        total += len(ids)
        repeats += sum(1 for h in ids if h in seen)
        seen.update(ids)
    return total, repeats


def leading_cached_blocks(hash_lists: list[list[int]], history: set[int] | None = None) -> list[int]:
    """Per row, how many leading blocks were already seen in earlier rows (a prefix cache's view);
    ``history`` holds blocks seen before the first row."""
    seen: set[int] = set(history or ())
    out = []
    for ids in hash_lists:
        run = 0
        while run < len(ids) and ids[run] in seen:
            run += 1
        out.append(run)
        seen.update(ids)
    return out
