"""Who writes the report files, and in what order, at every report write.

1. every ``loadkit_write_report`` implementation (loadkit's report.json/CSV and report.html
   first, then the plugins'), in one pluggy call;
2. at the final write only, ``loadkit_report_written`` — the files exist by then;
3. when a third-party implementation raised in 1 or 2: the run is marked invalid with the
   plugin named, and loadkit's own writers write again, so report.json says why.

A third-party failure never stops loadkit's writers (``loadkit.plugins.guard.CONTAINED``); a failure of
loadkit's own writer propagates to the caller, as it always did.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from loadkit.plugins.guard import GuardedPluginManager, HookFailure

log = logging.getLogger("loadkit")


class Marks(Protocol):
    """What the dispatch needs of the stats collector."""

    def report(self) -> dict[str, Any]: ...

    def mark_invalid(self, reason: str) -> None: ...


def write_all(pm: GuardedPluginManager, stats: Marks, report_dir: str, final: bool) -> dict[str, Any]:
    """Write every report format; returns the report as finally written."""
    report = stats.report()
    pm.hook.loadkit_write_report(report=report, report_dir=report_dir, final=final)
    failed = _mark(stats, pm.take_failures("loadkit_write_report"))
    if final:
        pm.hook.loadkit_report_written(report=report, report_dir=report_dir)
        failed += _mark(stats, pm.take_failures("loadkit_report_written"))
    if failed:
        report = stats.report()
        _builtin_writers(pm)(report=report, report_dir=report_dir, final=final)
    return report


def _mark(stats: Marks, failures: list[HookFailure]) -> int:
    for failure in failures:
        log.error("loadkit: %s", failure.describe(), exc_info=failure.exc)
        stats.mark_invalid(failure.describe())
    return len(failures)


def _builtin_writers(pm: GuardedPluginManager) -> Any:
    """``loadkit_write_report`` without any third-party implementation (pluggy's subset)."""
    from loadkit.plugins import BUILTIN_PLUGINS

    others = [p for p in pm.get_plugins() if pm.get_name(p) not in BUILTIN_PLUGINS]
    return pm.subset_hook_caller("loadkit_write_report", remove_plugins=others)
