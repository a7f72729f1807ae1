"""The HTML section "Where the time goes" from report.json's server_breakdown (issue 26)."""

from __future__ import annotations

import re

from loadkit.report import build_html
from loadkit.report.breakdown import breakdown_section
from loadkit.stats.aggregate import GroupStats
from loadkit.stats.report import group_section
from tests.helpers.records import record
from tests.report.conftest import make_rows, report_from_rows


def engine_breakdown(prefill_ms: float, decode_ms: float, n: int = 20) -> dict:
    g = GroupStats()
    for i in range(n):
        r = record(ttft_ms=prefill_ms + 2.0 + i * 0.1)
        r.server_timings = {"prompt_ms": prefill_ms, "predicted_ms": decode_ms, "predicted_n": 3}
        g.add(r)
    return group_section(g, (), 1.0)["server_breakdown"]


def report_with(breakdowns: dict) -> dict:
    report = report_from_rows({e: make_rows(e, 30, i) for i, e in enumerate(breakdowns)})
    for engine, b in breakdowns.items():
        report["engines"][engine]["server_breakdown"] = b
    return report


def test_section_shows_stages_plot_and_dominance():
    silent = GroupStats()
    silent.add(record())
    report = report_with({"llama": engine_breakdown(30.0, 5.0), "sim": engine_breakdown(1.0, 50.0),
                          "tgi": group_section(silent, (), 1.0)["server_breakdown"]})  # fmt: skip
    html = build_html(report, None)
    sec = html.split('<section id="breakdown">')[1].split("</section>")[0]
    assert '<svg class="plot" data-plot="server-breakdown"' in sec
    # Stacked bars: mean and median per engine that reported; one rect per stage shown.
    rects = re.findall(r'<rect class="series"[^>]*><title>([^<]+)</title>', sec)
    assert any(t.startswith("prefill: 30") for t in rects) and any(t.startswith("decode: 50") for t in rects)
    assert "llama: TTFT: prefill: compute-bound" in sec
    assert "sim: TTFT: network + client" in sec and "E2E: decode: memory-bound" in sec
    assert 'data-missing="server breakdown"' in sec and "not reported by tgi" in sec
    assert "<td>queue</td><td>not reported</td>" in sec  # llama.cpp has no queue time: not 0
    assert '<a href="#breakdown">' in html


def test_no_engine_reported_says_so():
    html = breakdown_section(report_with({"a": None}))
    assert "Not measured: no engine reported per-request timings" in html
    assert "<svg" not in html
