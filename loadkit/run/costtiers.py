"""The cost and SLO-tier options (--gpu-hour-cost, --gpus, --currency, --slo-tier), their parsed
form, and what a run resolves from them: the tiers (command line over the scenario's
[[slo_tiers]]) and each target's GPU-hour price (its own over the command line's)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from loadkit.run.errors import ConfigError
from loadkit.stats.cost import DEFAULT_CURRENCY, CostRate
from loadkit.stats.options import percent
from loadkit.stats.tiers import ATTAINMENT_TARGET, SloTier, parse_tier, parse_tiers, validated_tier


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a price") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _gpus(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of GPUs") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def add_cost_tier_arguments(group: Any) -> None:
    """The cost and tier options on loadkit's argument group (docs/cost.md)."""
    group.add_argument("--slo-tier", action="append", type=validated_tier, default=None,
                       metavar="NAME:KEY=MS[,KEY=MS]", env_var="LOADKIT_SLO_TIER", include_in_web_ui=False,
                       help="a named SLO set judged on every request beside --slo, repeatable; a staged run "
                            "reports per tier the highest stage meeting it (attainment >= --slo-attainment); "
                            "e.g. --slo-tier tight:ttft_ms=200,tpot_ms=30")  # fmt: skip
    group.add_argument("--slo-attainment", type=percent, default=100 * ATTAINMENT_TARGET, metavar="PCT",
                       env_var="LOADKIT_SLO_ATTAINMENT", include_in_web_ui=False,
                       help="a sweep's stage meets the SLOs (the stage table's goodput search, and each "
                            "--slo-tier) when at least PCT percent of its judged requests are good (default 90)")  # fmt: skip
    group.add_argument("--gpu-hour-cost", type=_price, default=None, metavar="PRICE",
                       env_var="LOADKIT_GPU_HOUR_COST", include_in_web_ui=False,
                       help="price of one GPU-hour: the report states each target's cost per 1M output "
                            "tokens and requests (a target's own gpu_hour_cost wins)")  # fmt: skip
    group.add_argument("--gpus", type=_gpus, default=1, metavar="N", env_var="LOADKIT_GPUS",
                       include_in_web_ui=False,
                       help="GPUs behind each target, for the cost figures (default 1; a target's own gpus wins)")  # fmt: skip
    group.add_argument("--currency", default=DEFAULT_CURRENCY, metavar="CODE", env_var="LOADKIT_CURRENCY",
                       include_in_web_ui=False, help="currency of --gpu-hour-cost, as stated in the report (default USD)")  # fmt: skip


@dataclass(frozen=True, slots=True)
class CostTierSettings:
    """The options as parsed on each node (the tiers checked, kept as given)."""

    tiers: tuple[SloTier, ...] = ()
    gpu_hour_cost: float | None = None
    gpus: int = 1
    currency: str = DEFAULT_CURRENCY
    attainment: float = ATTAINMENT_TARGET  # --slo-attainment as a fraction

    @classmethod
    def from_options(cls, options: Any) -> CostTierSettings:
        """ConfigError naming the option for a bad value (a web form's text skips argparse)."""
        try:
            tiers = parse_tiers(tuple(getattr(options, "slo_tier", None) or ()))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        price = getattr(options, "gpu_hour_cost", None)
        gpus = getattr(options, "gpus", 1) or 1
        try:
            price = None if price is None else _price(str(price))
            gpus = _gpus(str(gpus))
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(f"--gpu-hour-cost / --gpus: {exc}") from None
        try:
            attainment = percent(getattr(options, "slo_attainment", None) or 100 * ATTAINMENT_TARGET) / 100
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(f"--slo-attainment: {exc}") from None
        currency = str(getattr(options, "currency", None) or DEFAULT_CURRENCY)
        return cls(tiers, price, gpus, currency, attainment)


def run_tiers(settings: CostTierSettings, scenario_tiers: Iterable[dict[str, Any]]) -> tuple[SloTier, ...]:
    """--slo-tier when given, else the scenario's [[slo_tiers]] (checked when it was loaded)."""
    if settings.tiers:
        return settings.tiers
    out = []
    for table in scenario_tiers:
        limits = ",".join(f"{k}={v}" for k, v in table["slos"].items())
        out.append(parse_tier(f"{table['name']}:{limits}", "[[slo_tiers]]"))
    return tuple(out)


def run_costs(settings: CostTierSettings, targets: Iterable[Any]) -> dict[str, CostRate]:
    """Each target's price (its own gpu_hour_cost/gpus over the options'); a target without a
    price has no cost figures. ``targets``: TargetSpec-like (name, gpu_hour_cost, gpus)."""
    out = {}
    for spec in targets:
        price = spec.gpu_hour_cost if spec.gpu_hour_cost is not None else settings.gpu_hour_cost
        if price is not None:
            out[spec.name] = CostRate(float(price), int(spec.gpus or settings.gpus))
    return out
