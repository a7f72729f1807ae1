"""The report's images section and console line (report/images.py): drawn from report.json's
``images`` when requests carried images, absent from a text-only run."""

from __future__ import annotations

from loadkit.report.images import console_lines, images_section
from loadkit.stats.imagestats import ImageStats
from tests.helpers.records import IMAGE_RECORDS as RECORDS


def report_of(records) -> dict:
    stats = ImageStats()
    for r in records:
        stats.add(r)
    return {"images": stats.report()}


def test_the_section_and_the_console_line_show_the_figures():
    report = report_of(RECORDS)
    html = images_section(report)
    assert '<section id="images">' in html and "image tokens / request" in html
    assert "<td>5+</td>" in html and "<td>&gt;=4 MP</td>" in html
    (line,) = console_lines(report)
    assert line.startswith("images: 3 requests") and "0:20.0" in line and "5+:90.0" in line


def test_a_text_only_run_has_neither():
    report = report_of(RECORDS[:1])
    assert images_section(report) == "" and console_lines(report) == []
    assert images_section({}) == "" and console_lines({}) == []
