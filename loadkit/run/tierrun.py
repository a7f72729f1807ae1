"""A run's tier and cost context (stats/tiercontext.py) from its configuration, scenario and targets."""

from __future__ import annotations

from typing import Any

from loadkit.run.costtiers import run_costs, run_tiers
from loadkit.stats.tiercontext import TierContext


def tier_context(runtime: Any) -> TierContext:
    """``runtime``: the run's Runtime (its config, scenario and targets); read, never changed."""
    settings = runtime.config.settings.cost_tiers
    tiers = run_tiers(settings, getattr(runtime.scenario, "slo_tiers", None) or [])
    costs = run_costs(settings, [t.spec for t in runtime.targets])
    return TierContext.of(tiers, runtime.config.slo_objects(), costs, settings.currency, settings.attainment)
