"""The live page's charts are the report's SVG charts (loadkit.report.svg), drawn on the server
from stats.json's series, with engine names escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from loadkit.webui.charts import live_charts

EVIL = "e<script>alert(\"x\")</script>&'q'"


def doc(engine: str = EVIL, waiting: list[float | None] | None = None) -> dict:
    return {"window_s": 10.0,
            "windowed": {engine: {"t": [100.0, 102.0, 104.0, 106.0], "queue": [None] * 4,
                                  "ttft_ms_p50": [10.0, None, 12.0, 13.0], "ttft_ms_p99": [20.0, 21.0, 22.0, 23.0],
                                  "tpot_ms_p50": [1.0, 1.0, 1.0, 1.0], "tpot_ms_p99": [2.0, 2.0, 2.0, 2.0]}},
            "seconds": {engine: {"unix": [100, 101, 102], "output_tokens": [50, 60, 70], "in_flight": [1.0, 2.0, 1.5]}},
            "queue": {engine: {"t": [100.5, 102.5], "waiting": waiting or [None, None]}}}  # fmt: skip


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)


def test_each_chart_is_a_report_svg_with_the_placeholder_id():
    charts = live_charts(doc())
    assert set(charts) == {"ttft", "tpot", "tokps", "inflight"}
    for chart, svg in charts.items():
        assert svg.startswith(f'<svg class="plot" data-plot="live-{chart}" id="{chart}"'), svg[:120]
        assert 'class="frame"' in svg and 'class="tk"' in svg  # the report's axes and ticks


def test_p99_dashed_and_a_gap_is_not_drawn_as_zero():
    ttft = live_charts(doc())["ttft"]
    p50, p99 = re.findall(r'<path class="series" d="([^"]+)"[^>]*>', ttft)
    assert p50.startswith("M") and p50.count("M") == 1 and p50.count("L") == 2  # the None point is left out
    assert 'stroke-dasharray="5 3"><title>' in ttft  # p99


def test_queue_line_only_when_scraped():
    assert "stroke-dasharray" not in live_charts(doc())["inflight"]
    drawn = live_charts(doc(waiting=[3.0, 4.0]))["inflight"]
    assert (
        drawn.count('<path class="series"') == 2 and "stroke-dasharray" in drawn and "queue</title>" in drawn
    )


def test_engine_names_are_escaped():
    for svg in live_charts(doc()).values():
        tags = Tags()
        tags.feed(svg)
        assert "script" not in tags.tags
        assert "e&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;q&#39;" in svg


def test_no_data_yet_says_so():
    empty = live_charts({"window_s": 10.0, "windowed": {}, "seconds": {}, "queue": {}})
    assert all("no data yet" in svg and 'class="series"' not in svg for svg in empty.values())


def test_an_hour_of_points_is_thinned_per_pixel_column_keeping_spikes():
    from loadkit.report.svg import Series
    from loadkit.webui.charts import COLUMNS, _thin

    n = 5000
    ys = [10.0 + (i % 3) for i in range(n)]
    ys[2345], ys[100] = 900.0, None
    thin = _thin(Series("e", [float(i) for i in range(n)], ys))
    assert len(thin.xs) <= 2 * COLUMNS and 900.0 in thin.ys and 10.0 in thin.ys and 12.0 in thin.ys
    assert thin.xs[0] == 0.0 and thin.xs[-1] == n - 1 and list(thin.xs) == sorted(thin.xs)
    short = Series("e", [1.0, 2.0], [3.0, None])
    assert _thin(short) is short
