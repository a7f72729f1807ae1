"""A request's expected reasoning split, from a trace's reasoning share (ServeGen's reason_ratio).

The workload asks ``max_tokens`` as the whole output, as before; the split says how much of it
the trace's service spent reasoning: round(max_tokens × ratio) tokens, the rest answer. The
report compares it with what the target realised (stats/lengthstats.py). With the hint on, the
request also sends the reasoning length as ``x-loadkit-reasoning-tokens`` (loadkit/types.py):
loadkit's simulator reasons that long, a real server ignores the header.
"""

from __future__ import annotations

import math

from loadkit.types import GenerationRequest


def expected_split(n_out: int, ratio: float) -> tuple[int, int]:
    """(reasoning, answer) tokens of an ``n_out``-token output whose reasoning share is ``ratio``."""
    reasoning = min(n_out, max(0, round(n_out * ratio)))
    return reasoning, n_out - reasoning


def apply_split(request: GenerationRequest, ratio: float, hint: bool) -> GenerationRequest:
    """Give ``request`` the split of its max_tokens at ``ratio``; NaN (a window without a ratio)
    leaves it without one."""
    if math.isnan(ratio):
        return request
    request.expected_reasoning_tokens, request.expected_answer_tokens = expected_split(
        request.max_tokens, ratio
    )
    request.reasoning_hint = hint
    return request
