"""ServeGen (alibaba/ServeGen, NSDI'26): per-window arrival statistics and length distributions.

A ServeGen client keeps two files per chunk:

- ``chunk-N-trace.csv`` (no header): ``window_start_s, rate, cv, family, param1, param2``, one
  row per 600 s window; ``family`` is ``Gamma`` or ``Weibull`` (empty when the rate is 0);
- ``chunk-N-dataset.json``: window start (s, every 21,600 s) → ``{"input_tokens": "{n: p, ...}",
  "output_tokens": "{...}"}``, each a Python dict literal of token count → probability.

Arrivals are synthesised window by window: the window holds round(rate × window) requests
(so the realised per-window rate is the file's, not a random draw around it), and their gaps
come from the fitted family with mean 1/rate and the window's CV (Gamma: shape 1/CV²; Weibull:
the shape whose CV is the window's), rescaled to fill the window. Lengths are drawn per request
from the distributions of the dataset window the request falls in. The sample gives input and
output as separate marginals, so they are drawn independently: no input–output relation is
invented. Everything is a pure function of (file, seed, window).

Arrivals are made on a grid of integer microseconds, each window's inside [start, end): the
replay's window cut (``Trace.window``) compares on that grid too, so an arrival that float
arithmetic used to put exactly on ``end_s`` is neither dropped by the replay nor counted by
``traces inspect`` alone. A chunk has a row every 600 s (idle windows have rate 0), so a jump
of more than a day between rows, in either file, is refused as a broken file, as is a request
time no dataset window covers.

ServeGen's reasoning clients (``reason/deepseek-r1``) add ``reason_ratio`` to each dataset
window: the share of the output spent reasoning, as a dict literal of ratio → probability (501
bins over [0, 1] in the real files; a bare number is taken as every request's ratio). Each
request draws its ratio from its window's distribution, independently of its lengths, and
carries the expected split: round(output_tokens × ratio) reasoning tokens, the rest answer
(reasoning.py). ``output_tokens`` is still asked as the whole output. Only loadkit's simulator
can be told how long to reason (the ``x-loadkit-reasoning-tokens`` header); a real server
decides for itself, so the report compares the expected share with the realised one and a
note says so at load, in the run's report and in ``traces inspect``.

ServeGen's multimodal clients (``multimodal/mm-image``) give ``text_tokens`` instead of
``input_tokens`` and per-request image counts and per-image tokens (servegenmm.py): the text
length is drawn from ``text_tokens`` as ``input_tokens`` would be, and each request's images
from its window's ``image_count`` and ``image_tokens`` (``image_tokens_for``).
"""

from __future__ import annotations

import ast
import csv
import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from loadkit.workload.servegenmm import MM_FIELDS, ImageTables, draw_image_tokens, is_multimodal, read_images
from loadkit.workload.tracereader import BadRow, TraceReadError, micros, parse_count

FAMILIES = ("Gamma", "Weibull")
_SEED_KEY = 0x5E4E
MAX_GAP_S = 86_400.0  # rows further apart than this are a broken file, not an idle stretch
_READ_FIELDS = ("input_tokens", "output_tokens", "reason_ratio", *MM_FIELDS)
# Read only to refuse a window that asks for them (servegenmm.py): never "ignored".
_CHECKED_FIELDS = ("audio_count", "audio_tokens", "video_count", "video_tokens")
_RATIO_KEY = 0x4EA5  # the ratio draws' own stream: lengths stay what they were without it


@dataclass(slots=True)
class Windows:
    """The trace CSV: one entry per window, in file order (sorted by start)."""

    path: Path
    start: np.ndarray
    rate: np.ndarray
    cv: np.ndarray
    family: list[str]
    width_s: float


@dataclass(slots=True)
class LengthTables:
    """The dataset JSON: per dataset window start, (values, probabilities) of input and output."""

    path: Path
    starts: np.ndarray
    inputs: list[tuple[np.ndarray, np.ndarray] | None]
    outputs: list[tuple[np.ndarray, np.ndarray] | None]
    width_s: float = math.inf  # how long after its start a dataset window holds (median step)
    notes: tuple[str, ...] = ()  # what the user should know of the fields read or not used
    # Per window, (ratios, probabilities) of reason_ratio; None where the window has none.
    ratios: list[tuple[np.ndarray, np.ndarray] | None] | None = None
    # A multimodal dataset's image fields per window (servegenmm.py); None for text datasets.
    images: ImageTables | None = None

    def at(self, t: float) -> int:
        """Index of the dataset window holding time t (the last one starting at or before it)."""
        return max(0, int(np.searchsorted(self.starts, t, side="right")) - 1)


def dataset_for(trace_path: Path) -> Path:
    """``chunk-N-trace.csv`` → ``chunk-N-dataset.json`` beside it."""
    name = trace_path.name
    if not name.endswith("-trace.csv"):
        raise TraceReadError(
            f"{trace_path}: expected a ServeGen trace named chunk-N-trace.csv "
            "(its lengths are read from chunk-N-dataset.json beside it)"
        )
    return trace_path.with_name(name[: -len("-trace.csv")] + "-dataset.json")


@functools.lru_cache(maxsize=4)
def read_windows(path: str) -> Windows:
    p = Path(path)
    starts: list[float] = []
    rates: list[float] = []
    cvs: list[float] = []
    families: list[str] = []
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            for cells in reader:
                if not cells or not any(c.strip() for c in cells):
                    continue
                try:
                    start, rate, cv, family = _window_row(cells)
                except BadRow as row:
                    raise TraceReadError(f"{p}: line {reader.line_num}: {row.detail}") from None
                if starts and start <= starts[-1]:
                    raise TraceReadError(
                        f"{p}: line {reader.line_num}: expected window starts in increasing "
                        f"order, got {start:g} after {starts[-1]:g}"
                    )
                if starts and start - starts[-1] > MAX_GAP_S:
                    raise TraceReadError(
                        f"{p}: line {reader.line_num}: window start {_secs(start)} s is "
                        f"{_days(start - starts[-1])} after the row before ({_secs(starts[-1])} s); "
                        "expected a row every window (idle ones with rate 0): a broken file?"
                    )
                starts.append(start)
                rates.append(rate)
                cvs.append(cv)
                families.append(family)
    except OSError as exc:
        raise TraceReadError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if not starts:
        raise TraceReadError(f"{p}: expected at least one window row, found none")
    width = float(np.median(np.diff(starts))) if len(starts) > 1 else 600.0
    return Windows(p, np.asarray(starts), np.asarray(rates), np.asarray(cvs), families, width)


def _window_row(cells: list[str]) -> tuple[float, float, float, str]:
    if len(cells) < 4:
        raise BadRow(
            "short row",
            f"expected 6 cells (window_start_s, rate, cv, family, param1, param2), got {len(cells)}",
        )
    numbers = []
    for name, text in zip(("window_start_s", "rate", "cv"), cells[:3], strict=True):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise BadRow("bad number", f"expected {name} as a non-negative number, got {text!r}")
        numbers.append(value)
    family = cells[3].strip()
    if numbers[1] > 0 and family not in FAMILIES:
        raise BadRow(
            "bad family",
            f"expected the fitted distribution Gamma or Weibull for a window with "
            f"rate {numbers[1]:g}, got {family!r}",
        )
    if numbers[1] > 0 and numbers[2] <= 0:
        raise BadRow("bad cv", f"expected a positive inter-arrival cv for a window with rate {numbers[1]:g}")
    return numbers[0], numbers[1], numbers[2], family


@functools.lru_cache(maxsize=4)
def read_lengths(path: str) -> LengthTables:
    p = Path(path)
    try:
        doc = orjson.loads(p.read_bytes())
    except OSError as exc:
        raise TraceReadError(
            f"{p}: cannot read: {exc.strerror or exc} (the ServeGen dataset beside the trace CSV)"
        ) from None
    except orjson.JSONDecodeError as exc:
        raise TraceReadError(f"{p}: line {exc.lineno} column {exc.colno}: expected JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or not doc:
        raise TraceReadError(f"{p}: expected an object of window start → length distributions")
    items = sorted(((_start(p, k), k) for k in doc), key=lambda kv: kv[0])
    for (s0, k0), (s1, k1) in zip(items, items[1:], strict=False):
        if s1 - s0 > MAX_GAP_S:
            raise TraceReadError(
                f"{p}: key {k1!r}: window start {_secs(s1)} s is {_days(s1 - s0)} after the one "
                f"before ({k0!r}); expected a window every few hours: a broken file?"
            )
    keys = [k for _, k in items]
    images = read_images(p, doc, keys) if is_multimodal(doc) else None
    text_field = "text_tokens" if images is not None else "input_tokens"
    ins = [_pmf(p, k, doc[k], text_field) for _, k in items]
    outs = [_pmf(p, k, doc[k], "output_tokens") for _, k in items]
    ratios = [_ratio_pmf(p, k, doc[k]) for _, k in items]
    starts = np.asarray([s for s, _ in items])
    width = float(np.median(np.diff(starts))) if len(starts) > 1 else math.inf
    notes = _field_notes(p, doc)
    for note in notes:  # once per process (cached); the run's report and inspect repeat it
        logging.getLogger("loadkit").warning("loadkit: %s", note)
    has_ratio = any(r is not None for r in ratios)
    return LengthTables(p, starts, ins, outs, width, notes, ratios if has_ratio else None, images)


def _field_notes(path: Path, doc: dict[str, object]) -> tuple[str, ...]:
    """What the user should know of the dataset's fields: how reason_ratio is used, and the
    fields synthesis does not use."""
    windows: dict[str, int] = {}
    for entry in doc.values():
        if isinstance(entry, dict):
            for key, value in entry.items():
                if key not in (*_READ_FIELDS, *_CHECKED_FIELDS) and value not in ("{}", {}, None, ""):
                    windows[key] = windows.get(key, 0) + 1
    notes = []
    with_ratio = sum(
        1 for e in doc.values() if isinstance(e, dict) and e.get("reason_ratio") not in ("{}", {}, None, "")
    )
    if with_ratio:
        notes.append(
            f"{path}: reason_ratio: {with_ratio} dataset windows give the reasoning share of the output; "
            "each request carries its expected split (output_tokens x ratio reasoning, the rest answer). "
            "Only loadkit's simulator takes the length (header x-loadkit-reasoning-tokens): a real server "
            "decides its own reasoning length, so the report compares the expected share with the "
            "realised one (lengths.by_target.<target>.reasoning), it does not enforce it"
        )
    with_images = sum(1 for e in doc.values() if isinstance(e, dict) and "image_count" in e)
    if with_images:
        notes.append(
            f"{path}: image_count, image_tokens: {with_images} dataset windows give images per request "
            "and tokens per image; each image is sent as a synthetic picture sized so that the "
            "qwen2-vl family charges those tokens (loadkit/imagetokens.py size_for_tokens); text "
            "lengths come from text_tokens"
        )
    if windows:
        notes.append(
            f"{path}: fields ignored: {', '.join(sorted(windows))} (only input_tokens and output_tokens "
            "are synthesised; reason_ratio sets the expected reasoning split)"
        )
    return tuple(notes)


def notes_for(trace_path: Path) -> tuple[str, ...]:
    """The dataset's load warnings for a trace CSV (read once, cached)."""
    return read_lengths(str(dataset_for(trace_path))).notes


def _days(gap_s: float) -> str:
    return f"{gap_s / 86_400:,.1f} days"


def _secs(t: float) -> str:
    """Seconds as written in a chunk (1209000, 0.5), never 1.209e+06."""
    return f"{t:.6f}".rstrip("0").rstrip(".")


def _start(path: Path, key: str) -> float:
    try:
        return float(key)
    except ValueError:
        raise TraceReadError(f"{path}: key {key!r}: expected a window start in seconds") from None


def _pmf(path: Path, key: str, entry: object, field: str) -> tuple[np.ndarray, np.ndarray] | None:
    where = f"{path}: window {key}: {field}"
    if not isinstance(entry, dict) or field not in entry:
        found = f" (found {', '.join(repr(k) for k in entry)})" if isinstance(entry, dict) and entry else ""
        raise TraceReadError(f"{where}: expected an object with {field!r}{found}")
    raw = entry[field]
    try:
        table = ast.literal_eval(raw) if isinstance(raw, str) else raw
    except (ValueError, SyntaxError):
        raise TraceReadError(
            f"{where}: expected a dict literal {{tokens: probability}}, got {str(raw)[:40]!r}"
        ) from None
    if not isinstance(table, dict):
        raise TraceReadError(f"{where}: expected a dict {{tokens: probability}}, got {type(table).__name__}")
    if not table:
        return None
    try:
        values = np.asarray([parse_count(v, field) for v in table], dtype=np.int64)
    except BadRow as row:
        raise TraceReadError(f"{where}: {row.detail}") from None
    probs = np.asarray([float(x) for x in table.values()], dtype=float)
    if (probs < 0).any() or not math.isclose(probs.sum(), 1.0, rel_tol=1e-6):
        raise TraceReadError(
            f"{where}: expected probabilities >= 0 summing to 1, they sum to {probs.sum():.6g}"
        )
    return values, probs / probs.sum()


def _ratio_pmf(path: Path, key: str, entry: object) -> tuple[np.ndarray, np.ndarray] | None:
    """A window's reason_ratio: {ratio: probability} (the real files), or one number for every
    request; None where the window has none (idle windows write "{}")."""
    where = f"{path}: window {key}: reason_ratio"
    raw = entry.get("reason_ratio") if isinstance(entry, dict) else None
    if raw in (None, "", "{}", {}):
        return None
    try:
        table = ast.literal_eval(raw) if isinstance(raw, str) else raw
    except (ValueError, SyntaxError):
        raise TraceReadError(
            f"{where}: expected a dict literal {{ratio: probability}} or a number, got {str(raw)[:40]!r}"
        ) from None
    if isinstance(table, int | float) and not isinstance(table, bool):
        table = {table: 1.0}
    if not isinstance(table, dict) or not table:
        raise TraceReadError(
            f"{where}: expected a dict {{ratio: probability}} or a number, got {str(raw)[:40]!r}"
        )
    try:
        values = np.asarray([float(v) for v in table], dtype=float)
        probs = np.asarray([float(x) for x in table.values()], dtype=float)
    except (TypeError, ValueError):
        raise TraceReadError(f"{where}: expected numbers, got {str(raw)[:40]!r}") from None
    if not ((values >= 0) & (values <= 1)).all():
        bad = values[(values < 0) | (values > 1) | np.isnan(values)][0]
        raise TraceReadError(f"{where}: expected ratios in [0, 1] (a share of the output), got {bad:g}")
    if (probs < 0).any() or not math.isclose(probs.sum(), 1.0, rel_tol=1e-6):
        raise TraceReadError(
            f"{where}: expected probabilities >= 0 summing to 1, they sum to {probs.sum():.6g}"
        )
    return values, probs / probs.sum()


def reason_ratios(trace_path: Path, seed: int, t: np.ndarray) -> np.ndarray | None:
    """Each request's reasoning share, drawn from the reason_ratio of the dataset window at its
    time t (NaN in a window without one); None when the dataset has no reason_ratio. Drawn from
    a stream of their own, so a request's lengths are the same with or without them."""
    tables = read_lengths(str(dataset_for(trace_path)))
    if tables.ratios is None:
        return None
    out = np.full(len(t), np.nan)
    which = np.maximum(np.searchsorted(tables.starts, t, side="right") - 1, 0)
    for j in np.unique(which):
        pmf = tables.ratios[int(j)]
        if pmf is None:
            continue
        rows = np.flatnonzero(which == j)
        rng = np.random.default_rng([seed & 0xFFFFFFFF, _SEED_KEY, _RATIO_KEY, int(j)])
        out[rows] = rng.choice(pmf[0], size=len(rows), p=pmf[1])
    return out


def image_tokens_for(trace_path: Path, seed: int, t: np.ndarray) -> list[tuple[int, ...]] | None:
    """Each request's images as their tokens (one entry per image), drawn from the multimodal
    dataset window at its time t (servegenmm.py); None for a text dataset. A stream of their
    own: a request's lengths are the same with or without them."""
    tables = read_lengths(str(dataset_for(trace_path)))
    if tables.images is None:
        return None
    which = np.maximum(np.searchsorted(tables.starts, t, side="right") - 1, 0)
    return draw_image_tokens(tables.images, which, seed ^ _SEED_KEY)


def weibull_shape(cv: float) -> float:
    """The Weibull shape k whose coefficient of variation is cv (CV falls as k grows)."""

    def cv_of(k: float) -> float:
        g1, g2 = math.lgamma(1 + 1 / k), math.lgamma(1 + 2 / k)
        return math.sqrt(max(math.exp(g2 - 2 * g1) - 1.0, 0.0))

    lo, hi = 0.02, 200.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if cv_of(mid) > cv:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def _gaps(family: str, rate: float, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if family == "Weibull":
        k = weibull_shape(cv)
        return rng.weibull(k, n) / (rate * math.gamma(1 + 1 / k))
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / (rate * shape), n)


def synthesise(
    trace_path: Path, seed: int, start_s: float | None, end_s: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival s in the file's time, input tokens, output tokens) for [start_s, end_s) only: a
    two-week chunk holds millions of requests, a run replays a window of it."""
    win = read_windows(str(trace_path))
    lengths = read_lengths(str(dataset_for(trace_path)))
    file_end = float(win.start[-1]) + win.width_s
    if start_s is not None and start_s >= file_end:
        raise TraceReadError(
            f"{trace_path}: start_s {_secs(start_s)} is past the file's last window "
            f"({_secs(float(win.start[-1]))}-{_secs(file_end)} s)"
        )
    lo = int(micros(float(win.start[0]) if start_s is None else start_s))
    hi = int(micros(file_end if end_s is None else end_s))
    times: list[np.ndarray] = []
    for i, w0 in enumerate(win.start):
        a, b = max(int(micros(float(w0))), lo), min(int(micros(float(w0) + win.width_s)), hi)
        if b <= a or win.rate[i] <= 0:
            continue
        rng = np.random.default_rng([seed & 0xFFFFFFFF, _SEED_KEY, i])
        times.append(a + _window_us(win.family[i], float(win.rate[i]), float(win.cv[i]), b - a, rng))
    t = (np.concatenate(times) if times else np.zeros(0, dtype=np.int64)) / 1e6
    n_in, n_out = _draw_lengths(lengths, t, seed)
    return t, n_in, n_out


def _window_us(family: str, rate: float, cv: float, span_us: int, rng: np.random.Generator) -> np.ndarray:
    """round(rate·span) arrivals whose gaps follow the family, scaled so the last gap ends the
    span: offsets in whole microseconds inside [0, span_us), whatever float rounding does to a
    last gap too small to see (a high-CV Gamma draws gaps of 1e-300 s)."""
    n = int(round(rate * span_us / 1e6))
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    gaps = _gaps(family, rate, cv, n + 1, rng)
    offsets = np.floor(np.cumsum(gaps)[:n] * (span_us / gaps.sum()))
    return np.minimum(offsets, span_us - 1).astype(np.int64)


def _draw_lengths(tables: LengthTables, t: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    n_in = np.zeros(len(t), dtype=np.int64)
    n_out = np.zeros(len(t), dtype=np.int64)
    which = np.maximum(np.searchsorted(tables.starts, t, side="right") - 1, 0)
    outside = (t < tables.starts[0]) | (t >= tables.starts[-1] + tables.width_s)
    if outside.any():
        first = float(t[np.argmax(outside)])
        raise TraceReadError(
            f"{tables.path}: expected length distributions for the {int(outside.sum())} requests "
            f"at {_secs(first)} s and on, the dataset's windows cover "
            f"{_secs(tables.starts[0])}-{_secs(tables.starts[-1] + tables.width_s)} s"
        )
    for j in np.unique(which):
        rows = np.flatnonzero(which == j)
        pin, pout = tables.inputs[j], tables.outputs[j]
        if pin is None or pout is None:
            raise TraceReadError(
                f"{tables.path}: window {tables.starts[j]:g}: expected length distributions "
                f"for the {len(rows)} requests the trace has in it, found none"
            )
        rng = np.random.default_rng([seed & 0xFFFFFFFF, _SEED_KEY, 1 << 20, int(j)])
        n_in[rows] = rng.choice(pin[0], size=len(rows), p=pin[1])
        n_out[rows] = rng.choice(pout[0], size=len(rows), p=pout[1])
    return n_in, n_out
