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
