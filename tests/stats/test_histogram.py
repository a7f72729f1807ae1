"""The histogram's promises: ≤ 0.1 % relative error, exact merge, exact count/sum/min/max."""

from __future__ import annotations

import math

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadkit.stats.histogram import (
    MAX_RELATIVE_ERROR,
    Histogram,
    bucket_bounds,
    bucket_index,
    bucket_indices,
    bucket_value,
)

# 1 µs to 100 days in ns, plus small integers (token counts).
VALUES = st.integers(min_value=0, max_value=2**53 - 1)
LATENCIES = st.integers(min_value=1_000, max_value=100 * 86_400 * 10**9)
QUANTILES = [0.0001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]


def nearest_rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered) - 1e-9) - 1)]


def test_error_bound_is_below_one_per_mille():
    assert MAX_RELATIVE_ERROR < 0.001


@given(VALUES)
def test_value_lies_in_its_bucket_and_midpoint_is_close(value):
    low, width = bucket_bounds(bucket_index(value))
    assert low <= value < low + width
    if value:
        assert abs(bucket_value(bucket_index(value)) - value) <= value * MAX_RELATIVE_ERROR


def test_buckets_tile_the_integers_without_gaps():
    previous_end = 0
    for index in range(0, 40 * 512):
        low, width = bucket_bounds(index)
        assert low == previous_end
        previous_end = low + width


@given(st.lists(VALUES, min_size=1, max_size=200))
def test_vectorised_indices_match_scalar(values):
    array = np.asarray(values, dtype=np.int64)
    assert bucket_indices(array).tolist() == [bucket_index(v) for v in values]


@settings(max_examples=200)
@given(st.lists(LATENCIES, min_size=1, max_size=300))
def test_percentiles_within_error_of_exact_nearest_rank(values):
    hist = Histogram()
    hist.record_many(np.asarray(values, dtype=np.int64))
    for q, got in zip(QUANTILES, hist.percentiles(QUANTILES), strict=True):
        exact = nearest_rank(values, q)
        assert got is not None
        assert abs(got - exact) <= exact * MAX_RELATIVE_ERROR, (q, exact, got)


@given(st.lists(VALUES, max_size=100), st.lists(VALUES, max_size=100))
def test_merge_equals_recording_everything_into_one(a, b):
    left, right, together = Histogram(), Histogram(), Histogram()
    for v in a:
        left.record(v)
    right.record_many(np.asarray(b, dtype=np.int64))
    together.record_many(np.asarray(a + b, dtype=np.int64))
    left.merge(right)
    assert left == together
    assert left.percentiles(QUANTILES) == together.percentiles(QUANTILES)
    assert (left.count, left.total, left.min, left.max) == (len(a + b), sum(a + b), min(a + b, default=None),
                                                            max(a + b, default=None))  # fmt: skip


@given(st.lists(st.tuples(LATENCIES, st.integers(1, 50)), min_size=1, max_size=50))
def test_weighted_record_equals_repeated_record(pairs):
    weighted, repeated, bulk = Histogram(), Histogram(), Histogram()
    for value, weight in pairs:
        weighted.record(value, weight)
        for _ in range(weight):
            repeated.record(value)
    values, weights = zip(*pairs, strict=True)
    bulk.record_many(np.asarray(values, dtype=np.int64), np.asarray(weights, dtype=np.int64))
    assert weighted == repeated == bulk
    assert weighted.total == sum(v * w for v, w in pairs)


@given(st.lists(VALUES, max_size=100))
def test_wire_round_trip(values):
    hist = Histogram()
    hist.record_many(np.asarray(values, dtype=np.int64))
    clone = Histogram.from_wire(hist.to_wire())
    assert clone == hist
    assert clone.percentiles(QUANTILES) == hist.percentiles(QUANTILES)


def test_wire_version_is_checked():
    wire = Histogram().to_wire()
    wire["v"] = 99
    with pytest.raises(ValueError, match="version"):
        Histogram.from_wire(wire)


def test_known_values_give_known_percentiles():
    hist = Histogram()
    hist.record_many(np.arange(1, 101, dtype=np.int64))  # exact region: every integer its own bucket
    assert hist.percentiles([0.5, 0.9, 0.99, 1.0]) == [50, 90, 99, 100]
    assert (hist.count, hist.mean, hist.min, hist.max) == (100, 50.5, 1, 100)


def test_empty_histogram_says_none_not_zero():
    hist = Histogram()
    assert hist.percentiles([0.5]) == [None]
    assert hist.mean is None and hist.min is None and hist.max is None


def test_negative_values_are_clamped_and_counted():
    hist = Histogram()
    hist.record(-5)
    hist.record_many(np.asarray([-1, 3], dtype=np.int64))
    assert hist.clamped == 2
    assert hist.min == 0 and hist.count == 3


def test_memory_does_not_grow_with_count():
    hist = Histogram()
    rng = np.random.default_rng(1)
    for _ in range(20):
        hist.record_many(rng.integers(1_000, 3_600 * 10**9, 10_000))
    hist.record_many(np.asarray([1_000, 3_600 * 10**9], dtype=np.int64))  # both ends of the span
    size = hist._counts.nbytes
    for _ in range(20):
        hist.record_many(rng.integers(1_000, 3_600 * 10**9, 10_000))
    assert hist._counts.nbytes == size <= 200_000
    assert hist.count == 400_002


def _recorded(values: list[int]) -> Histogram:
    hist = Histogram()
    hist.record_many(np.asarray(values, dtype=np.int64))
    return hist


@settings(max_examples=200)
@given(st.lists(VALUES, max_size=60), st.lists(VALUES, max_size=60), st.lists(VALUES, max_size=20))
def test_a_decoded_histogram_behaves_as_the_one_it_was_sent_from(a, b, more):
    """Decoded histograms keep their buckets as sent until used (a master merges them): every
    use — merged into one, merged into, recorded into, read, re-sent — gives what the
    histogram it came from gives."""
    sent_a, sent_b = _recorded(a), _recorded(b)
    into = _recorded(more)
    into.merge(Histogram.from_wire(sent_a.to_wire()))
    expected = _recorded(more)
    expected.merge(sent_a)
    assert into == expected and into.percentiles(QUANTILES) == expected.percentiles(QUANTILES)
    decoded = Histogram.from_wire(sent_a.to_wire())
    decoded.merge(Histogram.from_wire(sent_b.to_wire()))
    decoded.record_many(np.asarray(more, dtype=np.int64))
    for value in more[:3]:
        decoded.record(value)
    sent_a.merge(sent_b)
    sent_a.record_many(np.asarray(more, dtype=np.int64))
    for value in more[:3]:
        sent_a.record(value)
    assert decoded.counts == sent_a.counts and decoded == sent_a
    assert Histogram.from_wire(decoded.to_wire()).percentiles(QUANTILES) == sent_a.percentiles(QUANTILES)
    copied = Histogram.from_wire(sent_b.to_wire()).copy()
    assert copied == sent_b and (copied.min, copied.max, copied.mean) == (sent_b.min, sent_b.max, sent_b.mean)


def test_a_malformed_wire_histogram_is_refused_when_decoded():
    wire = _recorded([5, 900, 70_000]).to_wire()
    with pytest.raises(ValueError, match="indices"):
        Histogram.from_wire({**wire, "c": wire["c"][:-1]})
    with pytest.raises(ValueError, match="indices"):
        Histogram.from_wire({**wire, "i": wire["i"][:-1]})
    with pytest.raises(ValueError, match="negative"):
        Histogram.from_wire({**wire, "o": -1})
    with pytest.raises(ValueError, match="width"):
        Histogram.from_wire({**wire, "w": 3})
    with pytest.raises(ValueError, match="packed"):
        Histogram.from_wire({**wire, "i": list(wire["i"])})


@pytest.mark.parametrize("weight", [1, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**40])
def test_packed_buckets_carry_any_count_and_the_widest_span(weight):
    """The wire packs the buckets (indices as uint16 from the lowest, counts as narrow as their
    largest allows): the counts of every width and the span from 0 to 2^62 come back exact."""
    sent = Histogram()
    for value in (0, 3, 1_000_003):
        sent.record(value, weight)
    sent.record(2**62)  # the highest octave's bucket: the widest span there is
    wire = sent.to_wire()
    assert isinstance(wire["i"], bytes) and isinstance(wire["c"], bytes)
    decoded = Histogram.from_wire(msgpack.unpackb(msgpack.packb(wire), raw=False))
    assert decoded.counts == sent.counts and decoded == sent
    merged = Histogram()
    merged.merge(decoded)
    merged.merge(Histogram.from_wire(wire))
    sent.merge(sent.copy())
    assert merged.counts == sent.counts and merged.percentiles(QUANTILES) == sent.percentiles(QUANTILES)
