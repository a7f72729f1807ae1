"""Paged KV allocation over a length distribution, and how many sequences fit a KV budget.

A paged engine (vLLM, SGLang, TGI) gives each sequence ceil(length / block_size) blocks; the
unused tail of the last block is internal fragmentation:
    fragmentation = Σ(allocated − used) / Σ allocated     (aggregate over all sequences)
Sequences are counted at their final length (prompt + output), the most they ever hold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def blocks_per_sequence(lengths: np.ndarray, block_size: int) -> np.ndarray:
    """ceil(length / block_size) for every sequence, in integers (no float rounding)."""
    if block_size <= 0:
        raise ValueError(f"block size must be positive, got {block_size}")
    return (lengths + (block_size - 1)) // block_size


def fragmentation(lengths: np.ndarray | list[int], block_size: int) -> float | None:
    """Aggregate internal fragmentation; None when nothing is allocated (no lengths)."""
    arr = np.asarray(lengths, dtype=np.int64)
    allocated = int(blocks_per_sequence(arr, block_size).sum()) * block_size
    return (allocated - int(arr.sum())) / allocated if allocated else None


def paging_row(lengths: np.ndarray, block_size: int) -> dict[str, Any]:
    blocks = blocks_per_sequence(lengths, block_size)
    allocated = int(blocks.sum()) * block_size
    used = int(lengths.sum())
    n = int(lengths.size)
    return {
        "block_size": block_size,
        "blocks": int(blocks.sum()),
        "allocated_tokens": allocated,
        "used_tokens": used,
        "fragmentation": (allocated - used) / allocated if allocated else None,
        "mean_blocks_per_seq": float(blocks.mean()) if n else None,
        "mean_waste_tokens_per_seq": (allocated - used) / n if n else None,
    }


def choose_block_sizes(rows: list[dict[str, Any]], max_fragmentation: float) -> dict[str, Any]:
    """The least wasteful block size, and the largest one still under max_fragmentation.

    With nested sizes (8, 16, 32, ...) the smallest always wastes least; larger blocks mean
    shorter block tables and better kernels, so the largest acceptable one is the useful answer.
    """
    scored = [r for r in rows if r["fragmentation"] is not None]
    if not scored:
        return {"least_waste": None, "largest_under_limit": None, "limit": max_fragmentation}
    least = min(scored, key=lambda r: (r["fragmentation"], -r["block_size"]))
    ok = [r["block_size"] for r in scored if r["fragmentation"] <= max_fragmentation]
    return {
        "least_waste": least["block_size"],
        "largest_under_limit": max(ok) if ok else None,
        "limit": max_fragmentation,
    }


def fit_row(
    kv_bytes_per_token: float,
    block_size: int,
    kv_budget_bytes: float,
    lengths: np.ndarray | None,
    shared_fraction: float | None = None,
) -> dict[str, Any]:
    """Blocks and tokens that fit one GPU's KV budget, and sequences of this workload that fit."""
    block_bytes = kv_bytes_per_token * block_size
    num_blocks = max(0, math.floor(kv_budget_bytes / block_bytes))
    row: dict[str, Any] = {
        "block_size": block_size,
        "block_bytes": block_bytes,
        "num_blocks": num_blocks,
        "max_tokens": num_blocks * block_size,
    }
    row.update(_sequences_that_fit(num_blocks, block_size, lengths, shared_fraction))
    return row


def _sequences_that_fit(
    num_blocks: int, block_size: int, lengths: np.ndarray | None, shared_fraction: float | None
) -> dict[str, Any]:
    if lengths is None or lengths.size == 0:
        return {
            "max_seqs": None,
            "max_seqs_p99": None,
            "max_seqs_longest": None,
            "used_tokens_at_max_seqs": None,
            "max_seqs_with_sharing": None,
        }
    blocks = blocks_per_sequence(lengths, block_size)
    mean_blocks = float(blocks.mean())
    p99_blocks = math.ceil(float(np.percentile(lengths, 99)) / block_size)
    max_seqs = _fit_count(num_blocks, mean_blocks)
    return {
        "max_seqs": max_seqs,
        "max_seqs_p99": _fit_count(num_blocks, p99_blocks),
        "max_seqs_longest": _fit_count(num_blocks, int(blocks.max())),
        "used_tokens_at_max_seqs": int(max_seqs * float(lengths.mean())) if max_seqs is not None else None,
        "max_seqs_with_sharing": _with_sharing(num_blocks, mean_blocks, shared_fraction),
    }


def _fit_count(num_blocks: int, blocks_per_seq: float) -> int | None:
    """floor(num_blocks / blocks_per_seq); None when a sequence needs no blocks (all empty)."""
    return math.floor(num_blocks / blocks_per_seq) if blocks_per_seq > 0 else None


def _with_sharing(num_blocks: int, mean_blocks: float, shared: float | None) -> int | None:
    """Upper bound: every shared prefix already resident, so each sequence pays only its own part."""
    if shared is None or mean_blocks <= 0 or shared >= 1:
        return None
    return math.floor(num_blocks / (mean_blocks * (1.0 - shared)))
