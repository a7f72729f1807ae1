"""The length buckets' edges and the reasoning split, on hand-made raw-log lines whose figures are
worked out here by hand (the real runs' figures are compared in test_verify_tampered.py and the
matrix)."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.lengthbuckets import INPUT_BUCKETS, bucket_of, check_reasoning


def test_bucket_edges_are_the_reports():
    assert [INPUT_BUCKETS[bucket_of(n)][1] for n in (0, 255, 256, 1023, 1024, 4095, 4096, 16383, 16384, 10**6)] == [
        "<256", "<256", "256–1k", "256–1k", "1k–4k", "1k–4k", "4k–16k", "4k–16k", "≥16k", "≥16k"
    ]  # fmt: skip


def _line(
    outcome: str, expected: int | None, max_tokens: int, n_reasoning: int | None, n_out: int
) -> dict[str, Any]:
    return {"outcome": outcome, "expected_reasoning_tokens": expected, "max_tokens": max_tokens,
            "n_reasoning": n_reasoning, "n_out": n_out}  # fmt: skip


ROWS = [
    _line("ok", 30, 100, 20, 90),  # measured
    _line("ok", 10, 50, 5, 50),  # measured
    _line("ok", 40, 100, None, 100),  # no reasoning count: carried, not measured
    _line("timeout", 20, 100, 0, 10),  # failed: carried, not measured
    _line("ok", None, 100, 7, 100),  # no expected split: not carried
]
# Carried: 4 requests, expected 100 of 350 asked; measured: 2, expected 40 of 150, realised 25 of 140.
REPORT = {"requests": 4, "expected_share": 100 / 350, "expected_reasoning_tokens_mean": 25.0, "measured": 2,
          "expected_share_measured": 40 / 150, "realised_share": 25 / 140, "realised_reasoning_tokens_mean": 12.5,
          "share_error": 25 / 140 - 40 / 150, "note": None}  # fmt: skip


def test_the_reasoning_split_by_hand():
    v = Verdict()
    assert check_reasoning(v, "t", REPORT, ROWS)
    assert v.ok, v.disagreements
    assert v.checked["lengths"] == 8


def test_a_wrong_reasoning_share_is_named():
    v = Verdict()
    check_reasoning(v, "t", {**REPORT, "realised_share": 25 / 150, "measured": 3}, ROWS)
    assert sorted(d.figure for d in v.disagreements) == ["measured", "realised_share"]


def test_a_raw_log_without_the_expected_split_is_not_checked():
    v = Verdict()
    assert not check_reasoning(v, "t", REPORT, [{k: x for k, x in r.items() if k != "expected_reasoning_tokens"}
                                                 for r in ROWS])  # fmt: skip
    assert not v.checked
