"""loadkit's own stats: exact mergeable histograms per (engine, label), the distributed merge,
and the report document (its files and console table belong to the report package above this
one: report/files.py, report/console.py). Everything but ``install_stats`` (the Locust glue) works without Locust.

    add_stats_arguments(group)             # in init_command_line_parser
    collector = install_stats(environment)  # in the init event, on every node
    collector.add(record)                   # once per finished request (local / worker)
"""

from __future__ import annotations

from typing import Any

from loadkit.stats.aggregate import GroupStats
from loadkit.stats.collector import StatsCollector
from loadkit.stats.metrics import SLO_KEYS, Slo, meets
from loadkit.stats.options import StatsOptions, add_stats_arguments
from loadkit.stats.report import SCHEMA


def install_stats(environment: Any) -> StatsCollector:
    """Create this node's StatsCollector and register its Locust listeners (call at ``init``).
    The listeners are Locust glue (loadkit/locust/statslisteners.py): imported only when called,
    so ``import loadkit.stats`` needs no Locust."""
    from loadkit.locust.statslisteners import install_stats as _install

    return _install(environment)


__all__ = [
    "SCHEMA",
    "SLO_KEYS",
    "GroupStats",
    "Slo",
    "StatsCollector",
    "StatsOptions",
    "add_stats_arguments",
    "install_stats",
    "meets",
]
