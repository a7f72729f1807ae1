"""The SLO-tier counters as a collector section, and the two report sections they feed:
``slo_tiers`` (stats/tiers.py) and ``cost`` (stats/cost.py), computed after the engines and
stages sections whose windows and throughput they quote."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.collector import StatsCollector
from loadkit.stats.cost import cost_section
from loadkit.stats.runcontext import RunContext
from loadkit.stats.sections import Section
from loadkit.stats.tiers import RUN_TIER, TierStats, tiers_report

SECTION = "slo_tier_counts"  # the counters' wire name; the report's sections are below


def install_tier_sections(collector: StatsCollector, context: Callable[[], RunContext]) -> None:
    """Register the counters (fed every measured record) and the derived report sections."""

    def add(stats: TierStats, record: RequestRecord) -> None:
        ctx = context()
        stats.add(record, ctx.tiers.compiled, ctx.staged)

    def tiers(doc: dict[str, Any]) -> dict[str, Any] | None:
        ctx = context()
        if not ctx.tiers.compiled:
            return None
        windows = {e: s.get("window_s") for e, s in (doc.get("engines") or {}).items()}
        # The run's own SLOs are a tier only when they were judged as one (stats/tiercontext.py).
        run_slos = ctx.tiers.run_slos if any(name == RUN_TIER for name, _ in ctx.tiers.compiled) else ()
        stats = collector.merged_section(SECTION)
        return tiers_report(
            stats,
            ctx.tiers.tiers,
            run_slos,
            list(ctx.plan),
            doc.get("stages") or {},
            windows,
            ctx.tiers.attainment_target,
        )

    def cost(doc: dict[str, Any]) -> dict[str, Any] | None:
        ctx = context()
        return cost_section(doc, ctx.tiers.costs, ctx.tiers.currency) if ctx.tiers.costs else None

    collector.register_section(Section(SECTION, TierStats, TierStats.from_wire, add))
    collector.add_derived_section("slo_tiers", tiers)
    collector.add_derived_section("cost", cost)
