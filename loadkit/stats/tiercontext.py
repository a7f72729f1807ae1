"""What the SLO-tier and cost sections need of a run (part of its RunContext): the tiers, compiled
once, the run's own SLOs, and each target's GPU-hour price."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from loadkit.stats.cost import DEFAULT_CURRENCY, CostRate
from loadkit.stats.metrics import Slo
from loadkit.stats.tiers import ATTAINMENT_TARGET, CompiledTiers, SloTier, compile_tiers


def _no_costs() -> Mapping[str, CostRate]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TierContext:
    tiers: tuple[SloTier, ...] = ()
    run_slos: tuple[Slo, ...] = ()
    compiled: CompiledTiers = ()  # compile_tiers(tiers, run_slos): judged on every request
    costs: Mapping[str, CostRate] = field(default_factory=_no_costs)
    currency: str = DEFAULT_CURRENCY
    attainment_target: float = ATTAINMENT_TARGET  # --slo-attainment: the sweeps' goodput threshold

    @classmethod
    def of(cls, tiers: tuple[SloTier, ...], run_slos: tuple[Slo, ...], costs: Mapping[str, Any],
           currency: str, attainment_target: float = ATTAINMENT_TARGET) -> TierContext:  # fmt: skip
        # The run's own SLOs are judged as a tier only beside other tiers or a price (its cost
        # per good token); alone they are the stages' and engines' business already.
        judged = compile_tiers(tiers, run_slos if (tiers or costs) else ())
        return cls(tiers, run_slos, judged, MappingProxyType(dict(costs)), currency, attainment_target)
