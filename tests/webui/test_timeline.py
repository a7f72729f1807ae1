"""Windowed percentiles from cumulative histograms, and the timeline's reset behaviour."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.stats.histogram import Histogram
from loadkit.webui.timeline import Timeline, seconds_series, window_percentiles

MS = 1_000_000


def hist(values_ms) -> Histogram:
    h = Histogram()
    h.record_many(np.array([round(v * MS) for v in values_ms], dtype=np.int64))
    return h


def nearest_rank(values, q):
    ordered = sorted(values)
    return ordered[max(0, int(np.ceil(q * len(ordered))) - 1)]


def test_window_is_the_difference_of_cumulative_histograms():
    old_values = [1000.0] * 50  # a slow past that must not leak into the window
    new_values = [float(v) for v in range(1, 101)]
    old, new = hist(old_values), hist(old_values + new_values)
    p50, p99 = window_percentiles(new, old, [0.5, 0.99])
    assert p50 / MS == pytest.approx(nearest_rank(new_values, 0.5), rel=0.001)
    assert p99 / MS == pytest.approx(nearest_rank(new_values, 0.99), rel=0.001)


def test_empty_window_is_none_not_zero():
    h = hist([5.0, 6.0])
    assert window_percentiles(h, h.copy(), [0.5]) == [None]
    assert window_percentiles(Histogram(), None, [0.5]) == [None]


def hists(ttft_ms, tpot_ms=(1.0,)):
    return {"e": {"ttft_ms": hist(ttft_ms), "tpot_ms": hist(tpot_ms)}}


def test_timeline_points_cover_only_the_last_window():
    tl = Timeline(window_s=10.0)
    cumulative: list[float] = []
    for step in range(12):  # one sample every 2 s; values jump from 10 ms to 500 ms at t=12
        cumulative += [10.0 if step < 6 else 500.0] * 5
        tl.sample(1000.0 + 2 * step, epoch=1, hists=hists(cumulative))
    points = tl.to_json()["e"]
    assert points["t"][0] == 1000.0 and len(points["t"]) == 12
    assert points["ttft_ms_p50"][0] == pytest.approx(10.0, rel=0.001)
    # At t=1022 the base is the snapshot of t=1012 (the newest ≥ 10 s old): only 500 ms values.
    assert points["ttft_ms_p50"][-1] == pytest.approx(500.0, rel=0.001)
    assert points["ttft_ms_p99"][-1] == pytest.approx(500.0, rel=0.001)
    assert points["queue"] == [None] * 12


def test_new_epoch_clears_the_timeline():
    tl = Timeline()
    tl.sample(1.0, epoch=1, hists=hists([10.0]), queue={"e": 3.0})
    assert tl.to_json()["e"]["queue"] == [3.0]
    tl.sample(3.0, epoch=2, hists=hists([20.0]))
    points = tl.to_json()["e"]
    assert points["t"] == [3.0]
    assert points["ttft_ms_p50"] == [pytest.approx(20.0, rel=0.001)]  # no base from the old epoch


def test_seconds_series_leaves_out_the_current_second():
    report = {"engines": {"e": {"timeseries": {"unix": [100, 101, 102], "output_tokens": [5, 6, 1],
                                               "in_flight": [1.0, 2.0, 0.5]}}}}  # fmt: skip
    assert seconds_series(report, now=102.4)["e"]["unix"] == [100, 101]
    assert seconds_series(report)["e"]["output_tokens"] == [5, 6, 1]
    assert seconds_series(report, last_s=1)["e"]["in_flight"] == [0.5]
