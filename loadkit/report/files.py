"""loadkit's own report files — report.json, stats.csv, timeseries.csv — written through the
public ``loadkit_write_report`` hook, like any plugin's format (registered as a built-in in
``loadkit.plugins.BUILTIN_PLUGINS``).
"""

from __future__ import annotations

from typing import Any

from loadkit.hookspecs import hookimpl


@hookimpl(tryfirst=True)
def loadkit_write_report(report: dict[str, Any], report_dir: str) -> None:
    from loadkit.stats.output import write_reports

    write_reports(report, report_dir)
