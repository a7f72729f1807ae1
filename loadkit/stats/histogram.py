"""Log-linear histograms that merge exactly and bound relative error to 0.098 %.

Values are non-negative integers (nanoseconds for times, plain counts for tokens). Each
power-of-two octave [2^k, 2^(k+1)) is split into 2^SUB_BITS equal buckets, and every value
below 2^(SUB_BITS+1) has a bucket of its own, so a bucket is never wider than 2^-SUB_BITS of
its lower bound. Quoting a bucket's midpoint is therefore off by at most 2^-(SUB_BITS+1) of
the true value (0.098 % for SUB_BITS = 9) anywhere from 1 ns to centuries.

Counts live in a dense array over the span of buckets in use (at most 512 per octave
spanned, ≤ 180 KB), so memory never depends on the number of values. Count, sum,
min and max are kept exactly. Merging is a bucket-wise sum, so percentiles of a merge are
identical to percentiles of one histogram fed every value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SUB_BITS = 9
_SUB = 1 << SUB_BITS  # buckets per octave
_LINEAR_LIMIT = 1 << (SUB_BITS + 1)  # below this every integer has its own bucket
MAX_RELATIVE_ERROR = 1.0 / (1 << (SUB_BITS + 1))

WIRE_VERSION = 2
# On the wire a histogram's buckets are two packed little-endian arrays (msgpack bin): the
# indices less the lowest ("o") as uint16 (every bucket index of an int64 is below 2^15), and
# the counts in the narrowest of these that holds the largest ("w": its width in bytes). A
# master then unpacks no Python int per bucket, and reads them with ``np.frombuffer``.
_COUNT_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("<u1"),
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
    8: np.dtype("<i8"),
}
_INDEX_DTYPE: np.dtype[Any] = np.dtype("<u2")
# The counts of a histogram with no buckets yet: one shared, read-only array (growing one always
# allocates a new array), so the hundreds a decoded snapshot's groups create cost no allocation.
_NO_COUNTS = np.zeros(0, dtype=np.int64)
_NO_COUNTS.flags.writeable = False


def bucket_index(value: int) -> int:
    """The bucket holding a non-negative integer ``value``."""
    if value < _LINEAR_LIMIT:
        return value
    shift = value.bit_length() - (SUB_BITS + 1)
    return (shift << SUB_BITS) + (value >> shift)


def bucket_bounds(index: int) -> tuple[int, int]:
    """(lowest value, width) of bucket ``index``: it holds lowest .. lowest + width − 1."""
    if index < _LINEAR_LIMIT:
        return index, 1
    shift = (index >> SUB_BITS) - 1
    mantissa = index - (shift << SUB_BITS)
    return mantissa << shift, 1 << shift


def bucket_value(index: int) -> float:
    """The value quoted for bucket ``index``: the midpoint of the integers it holds."""
    low, width = bucket_bounds(index)
    return low + (width - 1) / 2


def bucket_indices(values: np.ndarray) -> np.ndarray:
    """bucket_index for a non-negative int64 array, vectorised."""
    # frexp's exponent is the bit length, exactly, for integers below 2^53 (104 days in ns).
    _, bits = np.frexp(values.astype(np.float64))
    shift = np.maximum(bits.astype(np.int64) - (SUB_BITS + 1), 0)
    return np.where(values < _LINEAR_LIMIT, values, (shift << SUB_BITS) + (values >> shift))


class Histogram:
    """Exact-merge histogram of non-negative integers; see the module docstring.

    Counts are a dense int64 array over the span of buckets seen so far (grown on demand,
    ≤ 180 KB even for a span from 1 ns to 100 days), so bulk recording is a numpy bincount
    and percentiles a cumulative sum, with no per-bucket Python work.
    """

    __slots__ = ("_counts", "_offset", "count", "total", "_min", "_max", "clamped", "_sparse", "_packed")

    def __init__(self) -> None:
        self._counts = _NO_COUNTS
        self._offset = 0  # bucket index of _counts[0]
        self.count = 0
        self.total = 0  # exact sum of recorded values (times their weights)
        self._min: int | None = None
        self._max: int | None = None
        # Negative inputs (clock anomalies) recorded as 0; counted so a report can say so.
        self.clamped = 0
        # A decoded histogram keeps its buckets as sent, (lowest index, highest index, indices,
        # counts), until something records into it or reads it: a master holds one decoded
        # snapshot per worker and only ever merges them into a fresh histogram, so the dense
        # array over whole octaves (often 10-80 KB for a few dozen buckets) is never built.
        # Until then too the buckets stay the wire's bytes (``_packed``: lowest index, indices,
        # counts, count dtype), read as arrays on the first merge: most snapshots a master
        # decodes are replaced by the worker's next one before any report reads them.
        self._sparse: tuple[int, int, np.ndarray, np.ndarray] | None = None
        self._packed: tuple[int, bytes, bytes, np.dtype[Any]] | None = None

    @property
    def min(self) -> int | None:
        return self._min

    @property
    def max(self) -> int | None:
        return self._max

    @property
    def counts(self) -> dict[int, int]:
        """Non-empty buckets as {bucket index: count}."""
        self._densify()
        nonzero = np.flatnonzero(self._counts)
        return dict(zip((nonzero + self._offset).tolist(), self._counts[nonzero].tolist(), strict=True))

    def _unpack(self) -> None:
        """Read the wire's packed buckets (kept by ``from_wire``) as arrays, into ``_sparse``."""
        packed = self._packed
        if packed is not None:
            self._packed = None
            low, indices, counts, dtype = packed
            relative = np.frombuffer(indices, dtype=_INDEX_DTYPE)
            indices_at = relative.astype(np.int64) + low
            # int64 counts: every later merge adds them without a cast (a third of its cost)
            counts_at = np.frombuffer(counts, dtype=dtype).astype(np.int64)
            self._sparse = (low, low + int(relative.max()), indices_at, counts_at)

    def _densify(self) -> None:
        """Turn the buckets a decoded histogram kept as sent into the dense array."""
        self._unpack()
        sparse = self._sparse
        if sparse is not None:
            self._sparse = None
            low, high, indices, counts = sparse
            self._ensure(low, high)
            self._counts[indices - self._offset] = counts

    def _ensure(self, low: int, high: int) -> None:
        """Grow the dense array to cover bucket indices low..high."""
        size = len(self._counts)
        if size and self._offset <= low and high < self._offset + size:
            return
        if size:
            low, high = min(low, self._offset), max(high, self._offset + size - 1)
        # Round out to whole octaves so a drifting distribution does not regrow every time.
        low, high = (low >> SUB_BITS) << SUB_BITS, ((high >> SUB_BITS) + 1) << SUB_BITS
        grown = np.zeros(high - low, dtype=np.int64)
        if size:
            grown[self._offset - low : self._offset - low + size] = self._counts
        self._counts, self._offset = grown, low

    def record(self, value: int, weight: int = 1) -> None:
        """Record ``value`` (an int) ``weight`` times. Negative values are recorded as 0.

        One value at a time costs ~1 µs; the stats hot path batches into ``record_many``.
        """
        if value < 0:
            self.clamped += weight
            value = 0
        index = bucket_index(value)
        self._densify()
        self._ensure(index, index)
        self._counts[index - self._offset] += weight
        self._note(weight, value * weight, value, value)

    def _note(self, n: int, total: int, low: int, high: int) -> None:
        self.count += n
        self.total += total
        self._min = low if self._min is None else min(self._min, low)
        self._max = high if self._max is None else max(self._max, high)

    def record_many(self, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Record an int64 array at once (optionally each value ``weights[i]`` times)."""
        if values.size == 0:
            return
        negative = values < 0
        if negative.any():
            self.clamped += int(weights[negative].sum()) if weights is not None else int(negative.sum())
            values = np.maximum(values, 0)
        indices = bucket_indices(values)
        low, high = int(indices.min()), int(indices.max())
        self._densify()
        self._ensure(low, high)
        counts = np.bincount(indices - low, weights=weights, minlength=high - low + 1)
        start = low - self._offset
        self._counts[start : start + len(counts)] += counts.astype(np.int64)
        n = int(weights.sum()) if weights is not None else int(values.size)
        total = int((values * weights).sum()) if weights is not None else int(values.sum())
        self._note(n, total, int(values.min()), int(values.max()))

    def merge(self, other: Histogram) -> None:
        """Add every value of ``other`` into this histogram (exact)."""
        self._densify()
        if other.count:
            if other._packed is not None:  # the first merge of a decoded one: its arrays, kept
                other._unpack()
            if other._sparse is not None:  # a decoded one: its buckets as sent, no dense copy
                low, high, indices, counts = other._sparse
                self._ensure(low, high)
                self._counts[indices - self._offset] += counts
            else:
                self._ensure(other._offset, other._offset + len(other._counts) - 1)
                start = other._offset - self._offset
                self._counts[start : start + len(other._counts)] += other._counts
            assert other._min is not None and other._max is not None
            self._note(other.count, other.total, other._min, other._max)
        self.clamped += other.clamped

    def copy(self) -> Histogram:
        clone = Histogram()
        clone.merge(self)
        return clone

    def percentiles(self, quantiles: list[float]) -> list[float | None]:
        """Nearest-rank percentiles: for q the value of rank ceil(q·count), as its bucket midpoint.

        The quoted value is clamped into [min, max], which are exact; None when empty.
        """
        if self.count == 0 or self._min is None or self._max is None:
            return [None] * len(quantiles)
        self._densify()
        cumulative = np.cumsum(self._counts)
        ranks = [max(1, _ceil_rank(q, self.count)) for q in quantiles]
        positions = np.searchsorted(cumulative, ranks, side="left").tolist()
        return [min(max(bucket_value(p + self._offset), self._min), self._max) for p in positions]

    def percentile(self, q: float) -> float | None:
        return self.percentiles([q])[0]

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def to_wire(self) -> dict[str, Any]:
        """A compact msgpack-able dict: the non-empty buckets as two packed arrays (bytes)."""
        self._densify()
        nonzero = np.flatnonzero(self._counts)
        counts = self._counts[nonzero]
        low = int(nonzero[0]) + self._offset if nonzero.size else 0
        top = int(counts.max()) if counts.size else 0
        width = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4 if top < 1 << 32 else 8
        return {
            "v": WIRE_VERSION,
            "o": low,
            "i": (nonzero - (low - self._offset)).astype(_INDEX_DTYPE).tobytes(),
            "w": width,
            "c": counts.astype(_COUNT_DTYPES[width]).tobytes(),
            "n": self.count,
            "s": self.total,
            "lo": self._min,
            "hi": self._max,
            "neg": self.clamped,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Histogram:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"histogram wire version {data.get('v')!r}, expected {WIRE_VERSION}")
        hist = cls()
        low, indices, counts, dtype = data["o"], data["i"], data["c"], _COUNT_DTYPES.get(data["w"])
        if dtype is None or not isinstance(indices, bytes) or not isinstance(counts, bytes):
            raise ValueError(f"histogram wire has buckets of width {data['w']!r} or not packed")
        size = len(indices) // _INDEX_DTYPE.itemsize
        if len(indices) % _INDEX_DTYPE.itemsize or len(counts) != size * dtype.itemsize:
            raise ValueError(
                f"histogram wire has {len(indices)} bytes of indices for {len(counts)} of counts"
            )
        if not isinstance(low, int) or low < 0:
            raise ValueError(f"histogram wire has a negative bucket index {low}")
        if size:
            hist._packed = (low, indices, counts, dtype)  # kept as sent (see __init__)
        hist.count, hist.total = data["n"], data["s"]
        hist._min, hist._max, hist.clamped = data["lo"], data["hi"], data.get("neg", 0)
        return hist

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return self.to_wire() == other.to_wire()

    __hash__ = None  # type: ignore[assignment]


def _ceil_rank(q: float, count: int) -> int:
    """ceil(q·count) without float noise turning 0.5·10 into 5.000000001 → 6."""
    rank = q * count
    nearest = round(rank)
    return nearest if abs(rank - nearest) < 1e-9 else int(rank) + 1
