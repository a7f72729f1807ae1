"""ServeGen's multimodal datasets (its MULTIMODAL category, ``mm-image``): images per request.

A multimodal dataset window has no ``input_tokens``; it gives (upstream commit f891d11,
servegen/construct.py ``_sample_data_batch``):

- ``text_tokens``: the request's text length (the prompt's text part), a ``{tokens: p}`` literal;
- ``image_count``: how many images the request carries, ``{count: p}``;
- ``image_tokens``: the prompt tokens of *one* image, ``{tokens: p}``; ServeGen draws it once
  per image, independently of the count (1,280 at most: Qwen-VL's default ``max_pixels`` cap);
- ``audio_count``/``audio_tokens``, ``video_count``/``video_tokens``: the same for audio and
  video (``{0: 1.0}`` in every mm-image chunk);
- ``output_tokens`` as in the language datasets.

loadkit replays the text and images: the text from ``text_tokens`` (as ``input_tokens`` would
be), the images by drawing their count and each image's tokens, then making a synthetic image
whose size the simulator's model family charges exactly that many tokens (imagetokens.py
``size_for_tokens``). A window that asks for audio or video is refused by name: loadkit sends
no audio or video, and dropping them would send requests lighter than the trace's.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loadkit.workload.tracereader import TraceReadError

MM_FIELDS = ("text_tokens", "image_count", "image_tokens")
_UNSENT = ("audio_count", "audio_tokens", "video_count", "video_tokens")
_IMAGES_KEY = 0x1A6F  # the image draws' own stream: lengths stay what they were without them

Pmf = tuple[np.ndarray, np.ndarray]


@dataclass(slots=True, frozen=True)
class ImageTables:
    """Per dataset window, (count pmf, per-image tokens pmf); None where the window is idle."""

    path: Path
    windows: list[tuple[Pmf, Pmf] | None]


def is_multimodal(doc: dict[str, object]) -> bool:
    """A dataset whose windows carry ServeGen's multimodal fields (``image_count`` and kin)."""
    fields = (*MM_FIELDS, *_UNSENT)
    return any(isinstance(e, dict) and any(f in e for f in fields) for e in doc.values())


def _table(path: Path, key: str, entry: dict[str, object], field: str) -> Pmf | None:
    """One field's ``{value: probability}``; None when it is ``{}`` (an idle window)."""
    where = f"{path}: window {key}: {field}"
    if field not in entry:
        found = ", ".join(repr(k) for k in entry)
        raise TraceReadError(f"{where}: expected the multimodal field {field!r} (found {found})")
    raw = entry[field]
    try:
        table = ast.literal_eval(raw) if isinstance(raw, str) else raw
    except (ValueError, SyntaxError):
        raise TraceReadError(
            f"{where}: expected a dict literal {{value: probability}}, got {str(raw)[:40]!r}"
        ) from None
    if not isinstance(table, dict):
        raise TraceReadError(f"{where}: expected a dict {{value: probability}}, got {type(table).__name__}")
    if not table:
        return None
    values, probs = [], []
    for v, p in table.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TraceReadError(f"{where}: expected whole numbers >= 0 as values, got {v!r}")
        if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p) or p < 0:
            raise TraceReadError(f"{where}: value {v}: expected a probability >= 0, got {p!r}")
        values.append(v)
        probs.append(float(p))
    total = sum(probs)
    if not math.isclose(total, 1.0, rel_tol=1e-6):
        raise TraceReadError(f"{where}: expected probabilities summing to 1, they sum to {total:.6g}")
    return np.asarray(values, dtype=np.int64), np.asarray(probs) / total


def read_images(path: Path, doc: dict[str, object], keys: list[str]) -> ImageTables:
    """The image fields of every window (in ``keys`` order); errors name file, window and field."""
    out: list[tuple[Pmf, Pmf] | None] = []
    for key in keys:
        entry = doc[key]
        if not isinstance(entry, dict):
            raise TraceReadError(f"{path}: window {key}: expected an object of distributions")
        for field in _UNSENT:
            pmf = _table(path, key, entry, field) if field in entry else None
            if pmf is not None and field.endswith("_count") and (pmf[0] > 0).any():
                raise TraceReadError(
                    f"{path}: window {key}: field {field!r}: asks for {field.split('_')[0]} inputs, "
                    "which loadkit does not send (it replays text and images); refused rather than "
                    "sending requests lighter than the trace's"
                )
        counts = _table(path, key, entry, "image_count")
        tokens = _table(path, key, entry, "image_tokens")
        if counts is None or tokens is None:
            out.append(None)
            continue
        if (counts[0] > 0).any() and not (tokens[0] > 0).any():
            raise TraceReadError(
                f"{path}: window {key}: field 'image_tokens': expected tokens > 0 for the images "
                "image_count asks for, found only 0"
            )
        out.append((counts, tokens))
    return ImageTables(path, out)


def draw_image_tokens(tables: ImageTables, which: np.ndarray, seed: int) -> list[tuple[int, ...]]:
    """Per request (its dataset window index in ``which``), the tokens of each of its images:
    the count from the window's image_count, each image's tokens from image_tokens (as
    ServeGen draws them). A draw of 0 tokens (the files' lowest bin) is sent as the smallest
    image the family charges (imagetokens.py), and counted as what the simulator charges."""
    out: list[tuple[int, ...]] = [()] * len(which)
    for j in np.unique(which):
        pmfs = tables.windows[int(j)]
        if pmfs is None:
            continue
        rows = np.flatnonzero(which == j)
        rng = np.random.default_rng([seed & 0xFFFFFFFF, _IMAGES_KEY, int(j)])
        counts = rng.choice(pmfs[0][0], size=len(rows), p=pmfs[0][1])
        tokens = rng.choice(pmfs[1][0], size=int(counts.sum()), p=pmfs[1][1])
        at = 0
        for row, n in zip(rows, counts, strict=True):
            out[int(row)] = tuple(int(x) for x in tokens[at : at + n])
            at += int(n)
    return out
