"""Locust's per-second tables are trimmed without changing what Locust reports."""

from __future__ import annotations

import time

import pytest

from loadkit.locust.locustmem import KEEP_SECONDS, thin_history, trim_per_second

pytestmark = pytest.mark.in_process_locust


def test_old_per_second_counts_go_and_current_and_total_figures_stay():
    from locust.stats import RequestStats

    stats = RequestStats()
    now = int(time.time())
    for _ in range(20):
        stats.log_request("POST", "chat", 100, 10)
    stats.log_error("POST", "chat", "boom")
    entry = stats.entries[("chat", "POST")]
    # an hour of earlier seconds, as a long run leaves them
    for t in range(now - 3600, now - 1):
        for e in (entry, stats.total):
            e.num_reqs_per_sec[t] = 2
            e.num_fail_per_sec[t] = 1
    before = (entry.current_rps, entry.current_fail_per_sec, stats.total.current_rps, entry.num_requests,
              entry.num_failures, entry.get_response_time_percentile(0.5))  # fmt: skip
    removed = trim_per_second(stats, now=now)
    assert removed > 4 * 3000
    for e in (entry, stats.total):
        assert min(e.num_reqs_per_sec) >= now - KEEP_SECONDS
        assert min(e.num_fail_per_sec) >= now - KEEP_SECONDS
    after = (entry.current_rps, entry.current_fail_per_sec, stats.total.current_rps, entry.num_requests,
             entry.num_failures, entry.get_response_time_percentile(0.5))  # fmt: skip
    assert after == before


def test_history_stays_bounded_keeps_its_newest_rows_and_its_first():
    history: list[int] = []
    for i in range(10_000):
        history.append(i)
        if i % 2 == 0:  # the trimmer runs every other row
            thin_history(history, limit=100)
    assert len(history) <= 101
    assert history[-50:] == list(range(9950, 10_000))
    assert history[0] == 0 and history == sorted(history)
