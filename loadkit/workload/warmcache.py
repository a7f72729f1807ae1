"""Cache warm-up for a window taken from the middle of a Mooncake trace.

A window from the middle of a trace shares far more blocks with the trace *before* it than
within itself: a production engine meets it with a warm prefix cache, a freshly started one
cold. With ``trace.warm_cache = true`` the source first sends, once each, the prefixes the
window's requests will find in that history — prompt only, one output token, in the
``warmup`` stage (unmeasured: outside the stats, the raw log and conservation, counted apart
in the source's summary) — and the window's own arrivals start ``warm_cache_s`` later. The
window's ``expected_cached_tokens`` then count the history too, so the report's expected and
realised cache hits compare like with like.

Only the prefixes the window needs are sent (maximal leading runs of history blocks, a prefix
of another being covered by it), not the whole history: the cache state the window meets is
the same under an unbounded cache, at a fraction of the requests.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from loadkit.workload.tracereader import micros
from loadkit.workload.traces import Trace, leading_cached_blocks

WARMUP_STAGE = "warmup"  # the stage name loadkit.locust.runtime.WARMUP excludes from the stats
WARMUP_LABEL = "cache-warmup"


def history_blocks(full: Trace, start_s: float | None) -> set[int]:
    """Every block of the rows before the window."""
    if full.hash_ids is None or full.t_s is None or not start_s:
        return set()
    before = np.flatnonzero(micros(full.t_s) < micros(start_s))  # the grid Trace.window cuts on
    return {h for i in before for h in full.hash_ids[int(i)]}


def warm_prefixes(window: Trace, history: set[int], max_blocks: int | None) -> list[list[int]]:
    """The distinct maximal leading runs of history blocks the window's rows start with."""
    assert window.hash_ids is not None
    runs: set[tuple[int, ...]] = set()
    for ids in window.hash_ids:
        lead = 0
        while lead < len(ids) and ids[lead] in history:
            lead += 1
        if max_blocks is not None:
            lead = min(lead, max_blocks)
        if lead:
            runs.add(tuple(ids[:lead]))
    covered = {run[:k] for run in runs for k in range(1, len(run))}
    return [list(run) for run in sorted(runs) if run not in covered]


def expected_shares(
    window: Trace, history: set[int], block_tokens: int, max_input: int | None
) -> dict[str, Any]:
    """The window's prompt-token share a prefix cache holds: counting the history, and cold."""
    assert window.hash_ids is not None
    n_in = np.maximum(window.n_in, 1)
    if max_input is not None:
        n_in = np.minimum(n_in, max_input)
    n_in = np.minimum(n_in, [len(ids) * block_tokens for ids in window.hash_ids])
    warm = np.minimum(np.asarray(leading_cached_blocks(window.hash_ids, history)) * block_tokens, n_in)
    cold = np.minimum(np.asarray(leading_cached_blocks(window.hash_ids)) * block_tokens, n_in)
    prompt = float(n_in.sum())
    return {
        "window_prompt_tokens": int(prompt),
        "cached_share_with_history": float(warm.sum() / prompt),
        "cached_share_cold": float(cold.sum() / prompt),
    }


def max_blocks_for(max_input: int | None, block_tokens: int) -> int | None:
    return None if max_input is None else max(1, math.ceil(max_input / block_tokens))
