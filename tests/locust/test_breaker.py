"""The circuit breaker's rules on scripted outcome sequences (no clock: counts only)."""

from __future__ import annotations

import pytest

from loadkit.locust.breaker import Breaker
from loadkit.records import RequestRecord
from loadkit.run.breakerrules import BreakerRules


def rec(outcome: str, engine: str = "a", error: str | None = None) -> RequestRecord:
    return RequestRecord(request_id="x", engine=engine, adapter="openai", outcome=outcome, error=error)


def feed(breaker: Breaker, outcomes: list[str], engine: str = "a", error: str | None = None) -> list[int]:
    """Indexes of the requests that tripped it."""
    return [i for i, o in enumerate(outcomes) if breaker.observe(rec(o, engine, error)) is not None]


def test_parse_defaults_off_and_overrides():
    assert BreakerRules.parse("") == BreakerRules(20, 200, 90.0, 50)
    assert BreakerRules.parse(None) == BreakerRules()
    assert BreakerRules.parse("off") is None
    assert BreakerRules.parse("first=5, failed=75%") == BreakerRules(5, 200, 75.0, 50)
    assert BreakerRules.parse("first=0,window=0") == BreakerRules(0, 0, 90.0, 50)


@pytest.mark.parametrize(
    ("text", "says"),
    [("first=x", "first='x' is not a number"), ("first=2.5", "whole number"), ("colour=red", "expected off"),
     ("failed=100", "[0, 100)"), ("window=-1", "whole number"), ("first", "expected off")],
)  # fmt: skip
def test_parse_errors_name_the_option_and_key(text, says):
    with pytest.raises(ValueError) as err:
        BreakerRules.parse(text)
    assert "--breaker" in str(err.value) and says in str(err.value)


def test_first_n_all_failed_trips_on_the_nth_with_the_top_error():
    b = Breaker(BreakerRules(first=20, window=0))
    refused = "cannot connect to 127.0.0.1:9: [Errno 111]\n Connection refused"
    assert feed(b, ["connect_error"] * 18, error=refused) + feed(b, ["timeout_total"], error="slow") == []
    reason = b.observe(rec("connect_error", error=refused))
    assert reason is not None and "target 'a'" in reason and "first 20 requests all failed" in reason
    assert (
        "(top error: 19 × connect_error: cannot connect to 127.0.0.1:9: [Errno 111] Connection refused)"
        in reason
    )
    assert b.observe(rec("connect_error")) is None  # once


def test_one_ok_disarms_the_first_rule_and_cancelled_never_counts():
    b = Breaker(BreakerRules(first=5, window=0))
    assert feed(b, ["cancelled"] * 50 + ["http_error:500"] * 4 + ["ok"] + ["http_error:500"] * 100) == []
    b = Breaker(BreakerRules(first=5, window=0))
    assert feed(b, ["cancelled", "http_error:500"] * 5) == [9]


def test_rolling_window_trips_above_the_share_once_min_is_reached():
    b = Breaker(BreakerRules(first=0, window=10, failed_pct=80, min_count=10))
    assert feed(b, ["ok"] * 10 + ["http_error:503"] * 8) == []  # 8 of the last 10: not more than 80 %
    assert b.observe(rec("http_error:503")) is not None  # 9 of 10
    assert "9 of the last 10 requests failed (more than 80 %)" in (b.reason or "")


def test_window_forgets_what_slid_out():
    b = Breaker(BreakerRules(first=0, window=4, failed_pct=50, min_count=4))
    # f f ok ok ok ok f f : each window of 4 holds at most 2 failures = 50 %, never more.
    assert (
        feed(b, ["disconnected", "disconnected", "ok", "ok", "ok", "ok", "disconnected", "disconnected"])
        == []
    )
    assert b.targets["a"].failed_in_window == 2


def test_targets_are_judged_apart():
    b = Breaker(BreakerRules(first=3, window=0))
    assert feed(b, ["ok"] * 10, engine="good") == []
    assert feed(b, ["connect_error"] * 3, engine="dead") == [2]
    assert "target 'dead'" in (b.reason or "")


def words(i: int) -> str:
    return "".join(chr(ord("a") + int(d)) for d in str(i))  # distinct texts with no digits in them


def test_error_kinds_are_bounded():
    b = Breaker(BreakerRules(first=0, window=0))
    for i in range(1000):
        b.observe(rec("http_error:400", error=f"request {words(i)} is bad"))
    assert len(b.targets["a"].errors) == 32 and b.targets["a"].failures == 1000


def test_top_error_is_the_most_frequent_kind_not_one_text():
    """Texts that differ only in numbers are one kind (the issue: each was counted ×1); the
    status of an http_error is part of the kind."""
    b = Breaker(BreakerRules(first=12, window=0))
    for _ in range(5):
        b.observe(rec("http_error:503", error="overloaded"))
    for i in range(7):
        b.observe(rec("http_error:400", error=f"you requested {10000 + i} tokens, the limit is 8192"))
    assert "(top error: 7 × e.g. http_error:400: you requested 10000 tokens, the limit is 8192)" in (
        b.reason or ""
    )
    assert len(b.targets["a"].errors) == 2


def test_workers_judge_their_share_of_the_first_n():
    rules = BreakerRules(first=20)
    assert [rules.for_share(i, 3).first for i in range(3)] == [7, 7, 6]
    assert rules.for_share(0, 1).first == 20 and rules.for_share(7, 8).first == 5  # never below 5
    assert (
        BreakerRules(first=3).for_share(0, 4).first == 3 and BreakerRules(first=0).for_share(0, 2).first == 0
    )
    assert rules.for_share(1, 2).window == 200  # the window rule is a share already


def timed(outcome: str, t_s: float, engine: str = "a", error: str | None = None) -> RequestRecord:
    r = rec(outcome, engine, error)
    r.t_send_ns = r.t_end_ns = int(t_s * 1e9)
    return r


def test_time_rule_trips_after_dead_after_seconds_of_failures_only():
    """Issue 32: 4 users with backoff send a failure every few seconds; the window never fills."""
    b = Breaker(BreakerRules(first=20, window=200, min_count=50, dead_after_s=10))
    for t in range(0, 30):
        assert b.observe(timed("ok", t / 10)) is None
    refused = "cannot connect to 127.0.0.1:9: [Errno 111] Connection refused"
    times = [3.0, 3.1, 4.0, 6.5, 9.0, 12.9]
    assert [b.observe(timed("connect_error", t, error=refused)) for t in times] == [None] * len(times)
    reason = b.observe(timed("connect_error", 13.2, error=refused))
    assert (
        reason is not None
        and "target 'a': no request succeeded for 10.2 s (--breaker-dead-after 10)" in reason
    )
    assert (
        "all 7 since the first failure at" in reason and f"(first error: connect_error: {refused})" in reason
    )


def test_time_rule_restarts_with_each_success_and_is_per_target():
    b = Breaker(BreakerRules(first=0, window=0, dead_after_s=5))
    assert b.observe(timed("http_error:503", 0.0)) is None
    assert b.observe(timed("ok", 4.0)) is None  # alive after all
    assert b.observe(timed("http_error:503", 8.0)) is None
    assert b.observe(timed("ok", 20.0, engine="b")) is None
    assert b.observe(timed("http_error:503", 12.9)) is None  # 4.9 s of failures
    assert b.observe(timed("cancelled", 30.0)) is None  # cancelled is no failure
    assert b.observe(timed("http_error:503", 13.0)) is not None
    # One failure alone trips nothing, however old: a second must confirm it.
    lone = Breaker(BreakerRules(first=0, window=0, dead_after_s=5))
    assert lone.observe(timed("connect_error", 0.0)) is None and lone.observe(timed("ok", 60.0)) is None


def test_dead_after_option_defaults_disables_and_names_itself():
    class Options:
        breaker = ""
        breaker_dead_after = 10.0

    assert BreakerRules.from_options(Options()).dead_after_s == 10.0
    Options.breaker_dead_after = 0
    assert BreakerRules.from_options(Options()).dead_after_s == 0
    b = Breaker(BreakerRules.from_options(Options()))
    assert [b.observe(timed("connect_error", t)) for t in (0, 100, 1000)] == [None] * 3
    Options.breaker = "off"
    assert BreakerRules.from_options(Options()) is None
    Options.breaker = ""
    for bad, says in (("x", "is not a number"), (-1, ">= 0"), (float("inf"), ">= 0")):
        Options.breaker_dead_after = bad
        with pytest.raises(ValueError) as err:
            BreakerRules.from_options(Options())
        assert "--breaker-dead-after" in str(err.value) and says in str(err.value)
