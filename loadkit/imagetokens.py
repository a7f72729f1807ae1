"""Image tokens by resolution, for one named model family: Qwen2-VL (and Qwen2.5-VL).

The simulator charges prefill for them and the workload records what it expects, with the same
formula (docs/simulator.md, "Images"). Qwen2-VL's processor resizes an image so both sides are
multiples of 28 (14-pixel patches, merged 2 × 2) and its area lies within [min_pixels,
max_pixels], keeping the aspect ratio; each 28 × 28 cell is one token in the prompt. The bounds
are the defaults of Qwen's own image helper (qwen_vl_utils): 4 and 1,280 cells.
"""

from __future__ import annotations

import math

FAMILY = "qwen2-vl"
FACTOR = 28
MIN_PIXELS = 4 * FACTOR * FACTOR  # 3,136
MAX_PIXELS = 1280 * FACTOR * FACTOR  # 1,003,520


def resized(width: int, height: int) -> tuple[int, int]:
    """(width, height) after Qwen2-VL's resize: multiples of 28, area within the bounds."""
    if width < 1 or height < 1:
        raise ValueError(f"expected a positive image size, got {width} x {height}")
    h_bar = max(FACTOR, round(height / FACTOR) * FACTOR)
    w_bar = max(FACTOR, round(width / FACTOR) * FACTOR)
    if h_bar * w_bar > MAX_PIXELS:
        beta = math.sqrt(height * width / MAX_PIXELS)
        h_bar = max(FACTOR, math.floor(height / beta / FACTOR) * FACTOR)
        w_bar = max(FACTOR, math.floor(width / beta / FACTOR) * FACTOR)
    elif h_bar * w_bar < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (height * width))
        h_bar = math.ceil(height * beta / FACTOR) * FACTOR
        w_bar = math.ceil(width * beta / FACTOR) * FACTOR
    return w_bar, h_bar


def image_tokens(width: int, height: int) -> int:
    """The prompt tokens one image of ``width`` × ``height`` pixels takes (Qwen2-VL)."""
    w, h = resized(width, height)
    return (w // FACTOR) * (h // FACTOR)


MIN_CELLS, MAX_CELLS = MIN_PIXELS // (FACTOR * FACTOR), MAX_PIXELS // (FACTOR * FACTOR)
MAX_SIDE_CELLS = 8192 // FACTOR  # the workload's widest side (images.py MAX_SIDE): 292 cells


def size_for_tokens(tokens: int) -> tuple[int, int]:
    """A (width, height) that Qwen2-VL charges ``tokens`` for: the inverse of image_tokens, for
    traces that give an image's tokens rather than its pixels (ServeGen's mm-image).

    Sides are whole 28-pixel cells, so the resize keeps them and the tokens are cells across ×
    cells down. Of the grids a × b (a <= b <= 292 cells, the workload's widest side) the ones
    with a·b = tokens win, the squarest of them; a count with no such grid (a prime above 292)
    gets the squarest grid nearest to it, a token or two off. Counts outside [4, 1,280] are
    clamped: the family charges no fewer and no more (MIN_PIXELS, MAX_PIXELS).
    """
    want = min(max(tokens, MIN_CELLS), MAX_CELLS)
    best: tuple[int, float, int, int] | None = None  # (error, aspect, a, b)
    for a in range(math.isqrt(want), 0, -1):
        for b in {want // a, -(-want // a)}:
            if not a <= b <= MAX_SIDE_CELLS or not MIN_CELLS <= a * b <= MAX_CELLS:
                continue
            key = (abs(a * b - want), b / a, a, b)
            if best is None or key < best:
                best = key
    assert best is not None  # a = isqrt(want) always gives a grid
    _, _, a, b = best
    return b * FACTOR, a * FACTOR
