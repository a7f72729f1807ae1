"""Write report.html at the end of every run, through the public ``loadkit_report_written`` hook.

Register it like a built-in (add ``"loadkit.report.plugin"`` to ``loadkit.plugins.BUILTIN_PLUGINS``)
and every local or master node writes ``report.html`` beside ``report.json`` and says where.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from loadkit.hookspecs import hookimpl

log = logging.getLogger("loadkit")


@hookimpl
def loadkit_report_written(report: dict[str, Any], report_dir: str) -> None:
    from loadkit.report.page import write_html

    try:
        path = write_html(report_dir, report)
    except Exception as exc:  # the JSON/CSV reports are already written: say so, do not crash the run
        log.error("report.html not written: %r (rebuild it with `loadkit report %s`)", exc, report_dir)
        return
    sys.stdout.write(f"loadkit: HTML report {path}\n")
    sys.stdout.flush()
