"""Write report.html at the end of every run, through the public ``loadkit_write_report`` hook.

Registered as a built-in (``loadkit.plugins.BUILTIN_PLUGINS``): every local or master node
writes ``report.html`` beside ``report.json`` at the final write and says where, before any
``loadkit_report_written`` implementation runs.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from loadkit.hookspecs import hookimpl

log = logging.getLogger("loadkit")


@hookimpl(tryfirst=True)
def loadkit_write_report(report: dict[str, Any], report_dir: str, final: bool) -> None:
    from loadkit.report.page import write_html

    if not final:
        return  # the page is built once, from the final figures
    try:
        path = write_html(report_dir, report)
    except Exception as exc:  # the JSON/CSV reports are already written: say so, do not crash the run
        log.error("report.html not written: %r (rebuild it with `loadkit report %s`)", exc, report_dir)
        return
    sys.stdout.write(f"loadkit: HTML report {path}\n")
    sys.stdout.flush()
