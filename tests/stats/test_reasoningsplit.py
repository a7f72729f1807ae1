"""Expected against realised reasoning share per target (issue 34): token-weighted, over the
requests that carried a split; merged across workers; a target that does not reason is named.

Before: report.json had no reasoning share, expected or realised."""

from __future__ import annotations

import pytest

from loadkit.report.console import delivered_lines
from loadkit.stats.delivered import _lengths_pair
from loadkit.stats.lengthstats import LengthStats
from loadkit.stats.reasoningsplit import NOT_MEASURED, NOT_REASONING
from tests.helpers.records import record


def split_record(engine: str, asked: int, expected: int | None, reasoning: int | None, outcome: str = "ok"):
    r = record(engine=engine, outcome=outcome, n_out=asked)
    r.max_tokens, r.expected_reasoning_tokens, r.n_reasoning = asked, expected, reasoning
    return r


def test_shares_are_token_weighted_and_merge_across_workers():
    one, two = LengthStats(), LengthStats()
    one.add(split_record("a", 100, 80, 70))
    one.add(split_record("a", 10, 2, 2))
    two.add(split_record("a", 50, 25, 30))
    two.add(split_record("a", 40, 20, None, outcome="timeout_total"))  # asked, not measured
    two.add(split_record("b", 20, None, 5))  # no split: no reasoning entry for b
    merged = LengthStats.from_wire(one.to_wire())
    merged.merge(LengthStats.from_wire(two.to_wire()))
    report = merged.report()
    split = report["a"]["reasoning"]
    assert (split["requests"], split["measured"]) == (4, 3)
    assert split["expected_share"] == pytest.approx(127 / 200)
    assert split["expected_share_measured"] == pytest.approx(107 / 160)
    assert split["realised_share"] == pytest.approx(102 / 160)
    assert split["share_error"] == pytest.approx(-5 / 160) and split["note"] is None
    assert split["expected_reasoning_tokens_mean"] == pytest.approx(127 / 4)
    assert split["realised_reasoning_tokens_mean"] == pytest.approx(34.0)
    assert "reasoning" not in report["b"]
    pair = _lengths_pair(report["a"])
    assert pair is not None and pair["reasoning_share"]["realised"] == pytest.approx(102 / 160)
    lines = delivered_lines({"lengths": {"by_target": report}})
    assert lines == ["reasoning a: expected share 66.9% (reason_ratio), realised 63.7% over 3 of 4 requests, "
                     "-3.1 points"]  # fmt: skip


def test_a_target_that_does_not_reason_is_named_and_one_that_cannot_tell_too():
    stats = LengthStats()
    stats.add(split_record("plain", 100, 75, 0))  # the channel is counted: nothing reasoned
    stats.add(split_record("blind", 100, 75, None))  # no reasoning count at all
    report = stats.report()
    assert report["plain"]["reasoning"]["note"] == NOT_REASONING
    assert report["plain"]["reasoning"]["realised_share"] == 0.0
    assert report["blind"]["reasoning"]["note"] == NOT_MEASURED
    assert report["blind"]["reasoning"]["realised_share"] is None
    lines = delivered_lines({"lengths": {"by_target": report}})
    assert any(line.startswith("reasoning plain:") and "reason_ratio cannot apply" in line for line in lines)
