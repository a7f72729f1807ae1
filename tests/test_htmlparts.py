"""loadkit/htmlparts.py: the HTML building blocks the report, the web UI and capacity share."""

from __future__ import annotations

from loadkit import htmlparts
from loadkit.report import htmlutil


def test_text_is_escaped_and_markup_is_kept() -> None:
    html = str(htmlparts.section("s", "<title>", htmlparts.note("a < b")))
    assert "&lt;title&gt;" in html and "a &lt; b" in html and "<title>" not in html


def test_numbers_and_not_measured() -> None:
    assert htmlparts.num(None) == htmlparts.NOT_MEASURED
    assert htmlparts.num(1234) == "1,234" and htmlparts.num(1.25, 1) == "1.2"
    assert htmlparts.pct(0.5) == "50.0%"


def test_the_report_reexports_the_same_helpers() -> None:
    assert htmlutil.macro is htmlparts.macro and htmlutil.environment is htmlparts.environment
