"""The wall clock the figures use: a worker's correction moves every node-merged time it takes."""

from __future__ import annotations

import time

from loadkit.stats import wallclock
from loadkit.stats.classstats import ClassStats
from loadkit.stats.collector import StatsCollector
from loadkit.stats.delivered import DeliveredLoad
from loadkit.stats.tenantstats import TenantStats


def test_a_correction_moves_every_wall_clock_offset_taken_after_it():
    before = [DeliveredLoad().wall_offset_ns, TenantStats().wall_offset_ns, ClassStats().wall_offset_ns,
              StatsCollector().wall_offset_ns]  # fmt: skip
    try:
        wallclock.set_correction(-3_000_000_000)  # this host's clock is 3 s ahead of the master's
        after = [DeliveredLoad().wall_offset_ns, TenantStats().wall_offset_ns, ClassStats().wall_offset_ns,
                 StatsCollector().wall_offset_ns]  # fmt: skip
        assert abs(wallclock.now_ns() - (time.time_ns() - 3_000_000_000)) < 50_000_000
    finally:
        wallclock.set_correction(0)
    for old, new in zip(before, after, strict=True):
        assert abs((old - new) - 3_000_000_000) < 50_000_000, (old, new)
