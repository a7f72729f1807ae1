"""Per-length counts summarise exactly like the raw per-request values they replaced."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from loadkit.workload.realised import LengthCounts, length_summary


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], float) or isinstance(b[key], float):
            assert math.isclose(a[key], b[key], rel_tol=1e-9, abs_tol=1e-9), key
        else:
            assert a[key] == b[key], key


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=70_000), max_size=300))
def test_summary_equals_the_summary_of_the_raw_values(values):
    counts = LengthCounts()
    for v in values:
        counts.add(v)
    assert len(counts) == len(values)
    _same(counts.summary(), length_summary(values))


def test_memory_follows_the_longest_length_not_the_request_count():
    counts = LengthCounts()
    rng = np.random.default_rng(1)
    for v in rng.integers(1, 4096, size=200_000).tolist():
        counts.add(v)
    assert counts.counts.itemsize * len(counts.counts) <= 2 * 4096 * 8
    assert counts.summary()["count"] == 200_000


def test_percentiles_are_nearest_rank_like_the_rest_of_the_report():
    """p50 of 1..4 is the 2nd smallest (⌈0.5·4⌉ = 2), not 2.5 interpolated; p90 is the 4th, not 3.7."""
    for summary in (length_summary([4, 1, 3, 2]), _counts([4, 1, 3, 2]).summary()):
        assert (summary["p50"], summary["p90"], summary["p99"]) == (2, 4, 4)
    ten = list(range(10, 110, 10))  # 0.5·10 = 5 exactly: the 5th smallest, not the 6th
    assert length_summary(ten)["p50"] == 50 and _counts(ten).summary()["p50"] == 50
    assert length_summary([7])["p99"] == 7 and _counts([7]).summary()["p50"] == 7


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5_000), min_size=1, max_size=300))
def test_percentiles_are_the_ceil_q_n_th_smallest_values(values):
    ordered = sorted(values)
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        expected = ordered[max(1, math.ceil(Fraction(q * len(values), 100))) - 1]
        assert length_summary(values)[key] == expected
        assert _counts(values).summary()[key] == expected


def _counts(values: list[int]) -> LengthCounts:
    counts = LengthCounts()
    for v in values:
        counts.add(v)
    return counts
