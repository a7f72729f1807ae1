"""Log-linear histograms that merge exactly and bound relative error to 0.098 %.

Values are non-negative integers (nanoseconds for times, plain counts for tokens). Each
power-of-two octave [2^k, 2^(k+1)) is split into 2^SUB_BITS equal buckets, and every value
below 2^(SUB_BITS+1) has a bucket of its own, so a bucket is never wider than 2^-SUB_BITS of
its lower bound. Quoting a bucket's midpoint is therefore off by at most 2^-(SUB_BITS+1) of
the true value (0.098 % for SUB_BITS = 9) anywhere from 1 ns to centuries.

Counts live in a sparse dict keyed by bucket index: memory follows the number of distinct
buckets in use (at most ~512 per octave spanned), never the number of values. Count, sum,
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

WIRE_VERSION = 1

# Values per call above which numpy beats a Python loop (measured in benchmarks/bench_stats.py).
NUMPY_THRESHOLD = 48


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
    """Exact-merge histogram of non-negative integers; see the module docstring."""

    __slots__ = ("counts", "count", "total", "min", "max", "clamped")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.total = 0  # exact sum of recorded values (times their weights)
        self.min: int | None = None
        self.max: int | None = None
        # Negative inputs (clock anomalies) recorded as 0; counted so a report can say so.
        self.clamped = 0

    def record(self, value: int, weight: int = 1) -> None:
        """Record ``value`` (an int) ``weight`` times. Negative values are recorded as 0."""
        if value < 0:
            self.clamped += weight
            value = 0
        if value < _LINEAR_LIMIT:
            index = value
        else:
            shift = value.bit_length() - (SUB_BITS + 1)
            index = (shift << SUB_BITS) + (value >> shift)
        counts = self.counts
        counts[index] = counts.get(index, 0) + weight
        self.count += weight
        self.total += value * weight
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value

    def record_many(self, values: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Record an int64 array at once (optionally each value ``weights[i]`` times)."""
        if values.size == 0:
            return
        negative = values < 0
        if negative.any():
            self.clamped += int(weights[negative].sum()) if weights is not None else int(negative.sum())
            values = np.maximum(values, 0)
        self._add_indices(bucket_indices(values), weights)
        self.count += int(weights.sum()) if weights is not None else int(values.size)
        self.total += int((values * weights).sum()) if weights is not None else int(values.sum())
        low, high = int(values.min()), int(values.max())
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)

    def _add_indices(self, indices: np.ndarray, weights: np.ndarray | None) -> None:
        unique, inverse = np.unique(indices, return_inverse=True)
        sums = np.bincount(inverse, weights=weights) if weights is not None else np.bincount(inverse)
        counts = self.counts
        for index, n in zip(unique.tolist(), sums.astype(np.int64).tolist(), strict=True):
            counts[index] = counts.get(index, 0) + n

    def merge(self, other: Histogram) -> None:
        """Add every value of ``other`` into this histogram (exact)."""
        counts = self.counts
        for index, n in other.counts.items():
            counts[index] = counts.get(index, 0) + n
        self.count += other.count
        self.total += other.total
        self.clamped += other.clamped
        if other.min is not None:
            self.min = other.min if self.min is None else min(self.min, other.min)
        if other.max is not None:
            self.max = other.max if self.max is None else max(self.max, other.max)

    def copy(self) -> Histogram:
        clone = Histogram()
        clone.merge(self)
        return clone

    def percentiles(self, quantiles: list[float]) -> list[float | None]:
        """Nearest-rank percentiles: for q the value of rank ceil(q·count), as its bucket midpoint.

        The quoted value is clamped into [min, max], which are exact; None when empty.
        """
        if self.count == 0 or self.min is None or self.max is None:
            return [None] * len(quantiles)
        ranks = [max(1, _ceil_rank(q, self.count)) for q in quantiles]
        order = sorted(range(len(ranks)), key=ranks.__getitem__)
        out: list[float | None] = [None] * len(quantiles)
        seen, pos = 0, 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            while pos < len(order) and ranks[order[pos]] <= seen:
                out[order[pos]] = min(max(bucket_value(index), self.min), self.max)
                pos += 1
            if pos == len(order):
                break
        return out

    def percentile(self, q: float) -> float | None:
        return self.percentiles([q])[0]

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def to_wire(self) -> dict[str, Any]:
        """A compact JSON/msgpack-able dict: sparse buckets as two parallel lists."""
        keys = sorted(self.counts)
        return {
            "v": WIRE_VERSION,
            "i": keys,
            "c": [self.counts[k] for k in keys],
            "n": self.count,
            "s": self.total,
            "lo": self.min,
            "hi": self.max,
            "neg": self.clamped,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Histogram:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"histogram wire version {data.get('v')!r}, expected {WIRE_VERSION}")
        hist = cls()
        hist.counts = dict(zip(data["i"], data["c"], strict=True))
        hist.count, hist.total = data["n"], data["s"]
        hist.min, hist.max, hist.clamped = data["lo"], data["hi"], data.get("neg", 0)
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
