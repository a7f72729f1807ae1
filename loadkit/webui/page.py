"""The live chart page served at /loadkit/: one self-contained HTML document, rendered from
``loadkit/webui/templates/live.html.j2`` with the report's Jinja2 environment (autoescape).

Locust's React UI has no chart-extension point, so loadkit serves its own page. Nothing is
fetched from anywhere but ``stats.json`` next to it (the machine running the test often has
no internet, and a CDN would leak the run's URL). Its charts are the report's SVG charts,
drawn on the server (loadkit/webui/charts.py) and carried in stats.json.
"""

from __future__ import annotations

from loadkit.report.htmlutil import render

POLL_MS = 2000
CHARTS = (("ttft", "TTFT ms (p50 solid, p99 dashed; last {window} s)"),
          ("tpot", "TPOT ms (p50 solid, p99 dashed; last {window} s)"),
          ("tokps", "Output tokens/s (per second)"),
          ("inflight", "In-flight requests (solid) · server queue (dashed, when scraped)"))  # fmt: skip


def chart_page(window_s: float) -> str:
    charts = [(chart_id, title.format(window=f"{window_s:g}")) for chart_id, title in CHARTS]
    return render("live.html.j2", charts=charts, poll_ms=POLL_MS)
