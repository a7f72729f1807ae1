"""Qwen2-VL's image tokens by resolution (loadkit/imagetokens.py), checked by hand."""

from __future__ import annotations

import pytest

from loadkit.imagetokens import MAX_PIXELS, image_tokens, resized


@pytest.mark.parametrize(
    ("w", "h", "tokens"),
    [
        (640, 480, 23 * 17),  # 644 x 476 after rounding to multiples of 28
        (28, 28, 4),  # below min_pixels: scaled up to 56 x 56
        (1, 1, 4),
        (448, 448, 16 * 16),
        (4000, 3000, 41 * 30),  # above max_pixels: scaled to 1148 x 840 (floor to multiples of 28)
    ],
)
def test_tokens_by_resolution(w, h, tokens):
    assert image_tokens(w, h) == tokens


def test_the_resize_keeps_within_the_bounds_and_on_the_grid():
    for w, h in ((4000, 3000), (8192, 100), (100, 8192), (3, 2000)):
        rw, rh = resized(w, h)
        assert rw % 28 == 0 and rh % 28 == 0 and rw * rh <= MAX_PIXELS


def test_a_bad_size_is_refused():
    with pytest.raises(ValueError, match="positive image size"):
        image_tokens(0, 10)
