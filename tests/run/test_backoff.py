"""Backoff after fast failures: bounds, jitter, reset, and what does not count."""

from __future__ import annotations

import argparse
import random

import pytest

from loadkit.records import RequestRecord
from loadkit.run.backoff import Backoff, BackoffRules

MS = 1_000_000


def rec(outcome: str, took_ms: float) -> RequestRecord:
    return RequestRecord(request_id="x", engine="a", adapter="openai", outcome=outcome,
                         t_send_ns=10**12, t_end_ns=10**12 + int(took_ms * MS))  # fmt: skip


def test_waits_double_within_equal_jitter_bounds_up_to_the_cap():
    rules = BackoffRules(threshold_s=0.05, base_s=0.05, cap_s=1.0)
    backoff = Backoff(rules, random.Random(7))
    waits = [backoff.after(rec("connect_error", 0.1)) for _ in range(10)]
    for k, wait in enumerate(waits, start=1):
        bound = min(1.0, 0.05 * 2 ** (k - 1))
        assert bound / 2 <= wait <= bound
    assert waits[-1] >= 0.5  # capped at 1 s, never below half of it


def test_jitter_spreads_users_that_failed_together():
    rules = BackoffRules()
    waits = {
        round(Backoff(rules, random.Random(seed)).after(rec("http_error:500", 1)), 6) for seed in range(20)
    }
    assert len(waits) == 20


def test_success_resets_slow_failures_and_cancelled_do_not_wait():
    backoff = Backoff(BackoffRules(threshold_s=0.05, base_s=0.05, cap_s=5.0), random.Random(1))
    for _ in range(6):
        backoff.after(rec("connect_error", 1))
    assert backoff.streak == 6
    assert backoff.after(rec("http_error:500", 80)) == 0.0 and backoff.streak == 6  # slow: no hot loop
    assert backoff.after(rec("cancelled", 1)) == 0.0 and backoff.streak == 6
    assert backoff.after(rec("ok", 1)) == 0.0 and backoff.streak == 0
    assert 0.025 <= backoff.after(rec("connect_error", 1)) <= 0.05  # from the start again


def test_options():
    ns = argparse.Namespace
    assert BackoffRules.from_options(ns(backoff=False)) is None
    assert BackoffRules.from_options(ns()) == BackoffRules()
    rules = BackoffRules.from_options(ns(backoff=True, backoff_threshold_ms=10, backoff_max=0.02))
    assert rules == BackoffRules(0.01, 0.02, 0.02)
    for bad, says in ((dict(backoff_threshold_ms="x"), "--backoff-threshold-ms"), (dict(backoff_max=0), "--backoff-max"),
                      (dict(backoff_max=float("nan")), "--backoff-max")):  # fmt: skip
        with pytest.raises(ValueError) as err:
            BackoffRules.from_options(ns(backoff=True, **bad))
        assert says in str(err.value)
