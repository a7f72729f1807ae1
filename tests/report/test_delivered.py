"""report.html's delivered section shows the expected against the realised reasoning share of a
target whose requests carried a split (issue 34); before, a lengths pair it did not know broke it."""

from __future__ import annotations

from loadkit.report.delivered import delivered_section

PAIR = {"asked_mean": 24.0, "realised_mean": 24.0, "asked_p50": 24.0, "realised_p50": 24.0}


def report(share: dict | None) -> dict:
    lengths: dict = {"output_tokens": PAIR}
    if share is not None:
        lengths["reasoning_share"] = share
    stage = {"arrivals": 3, "asked": {"model": "trace"}, "realised": {"rate": 1.0, "cv": 1.0}, "rate_error": 0.0,
             "fit": {"test": None, "reason": "few"}, "concurrency": {"peak": 1, "mean": 0.5}}  # fmt: skip
    return {"delivered": {"by_target": {"a": {"stages": {"trace": stage}, "lengths": lengths}}}}


def test_the_reasoning_share_has_its_own_table():
    html = str(
        delivered_section(report({"expected": 0.754, "realised": 0.75, "error": -0.004, "note": None}))
    )
    assert "reasoning share expected" in html and "75.4%" in html and "75.0%" in html and "-0.4" in html
    assert "not enforced" in html
    plain = str(delivered_section(report(None)))
    assert "reasoning share expected" not in plain and "24" in plain
