"""Reports people act on: the self-contained report.html and run comparison (``loadkit compare``).

``write_html(report_dir)`` is what the end of a run calls; ``compare_runs`` backs the CLI.
"""

from __future__ import annotations

from loadkit.report.page import build_html, read_report, write_html
from loadkit.report.rawdata import RawData, load_raw, read_raw_logs

__all__ = ["RawData", "build_html", "load_raw", "read_raw_logs", "read_report", "write_html"]
