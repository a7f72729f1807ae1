"""Per-length counts summarise exactly like the raw per-request values they replaced."""

from __future__ import annotations

import math

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
