"""Finding (or, after a web-UI stop, rendering) the final HTML report for /loadkit/report.

loadkit's stats write report.json at every stop; the HTML report (``loadkit.report.write_html``)
may only be rendered at quit. A user who stops from the web UI and clicks the link should get
the report of the run just stopped, so it is rendered on demand from the report.json on disk
when the HTML is missing or older than it.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("loadkit.webui")

HTML_NAME = "report.html"
JSON_NAME = "report.json"


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def render_html(report_dir: str) -> str | None:
    """Call the report module's ``write_html``; the problem in one line, or None on success."""
    try:
        from loadkit.report import write_html  # type: ignore[import-not-found, attr-defined, unused-ignore]
    except ImportError:
        return (
            "loadkit's HTML report module (loadkit.report) is not installed; report.json is in " + report_dir
        )
    try:
        write_html(report_dir)
    except Exception as exc:  # shown to the user, and logged with its traceback
        log.exception("loadkit web UI: rendering the HTML report failed")
        return f"rendering the HTML report in {report_dir} failed: {exc!r}"
    return None


def find_report(report_dir: str, running: bool) -> tuple[str | None, str]:
    """(path of an up-to-date report.html, "") or (None, why there is none yet)."""
    if running:
        return None, "the run is still going: the final HTML report exists once it has stopped"
    html, data = os.path.join(report_dir, HTML_NAME), os.path.join(report_dir, JSON_NAME)
    html_t, data_t = _mtime(html), _mtime(data)
    if data_t is None and html_t is None:
        return None, f"no report yet: loadkit writes it to {report_dir} when a run has finished"
    if data_t is not None and (html_t is None or html_t < data_t):
        problem = render_html(report_dir)
        if problem is not None:
            return None, problem
        if _mtime(html) is None:
            return None, f"the report module wrote no {HTML_NAME} in {report_dir}"
    return html, ""
