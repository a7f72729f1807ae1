"""Cost per token and per request from a GPU-hour price and the measured throughput.

Cost per hour = price of one GPU-hour × GPUs behind the target. At a throughput of X per
second, one million cost 1e6 / (X × 3600) hours of that, so

    cost per 1M output tokens = cost per hour × 1e6 / (output tokens/s × 3600)
    cost per 1M requests      = cost per hour × 1e6 / (ok requests/s × 3600)

The throughput is the one the report already shows: the engine section's ``output_tokens_per_s``
and ``ok_per_s`` (ok requests and their output tokens over the measured window), a stage's
``output_tokens_per_s`` and ``requests_per_s`` (ok requests over its planned duration) at the
highest load meeting the SLOs, and a tier's ``good_output_tokens_per_s`` (output tokens of the
requests meeting that tier) for the cost per good token. A figure on this load, not a price
quote (docs/cost.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECONDS_PER_HOUR = 3600.0
MILLION = 1e6
DEFAULT_CURRENCY = "USD"


@dataclass(frozen=True, slots=True)
class CostRate:
    """What one target costs: the price of one GPU-hour and how many GPUs serve it."""

    gpu_hour_cost: float
    gpus: int = 1

    @property
    def per_hour(self) -> float:
        return self.gpu_hour_cost * self.gpus


def per_million(cost_per_hour: float, per_second: float | None) -> float | None:
    """Cost of one million units at ``per_second`` units a second; None without throughput."""
    if not per_second or per_second <= 0:
        return None
    return cost_per_hour * MILLION / (per_second * SECONDS_PER_HOUR)


def _at(cost_per_hour: float, tokens_per_s: float | None, requests_per_s: float | None) -> dict[str, Any]:
    return {"output_tokens_per_s": tokens_per_s, "requests_per_s": requests_per_s,
            "cost_per_1m_output_tokens": per_million(cost_per_hour, tokens_per_s),
            "cost_per_1m_requests": per_million(cost_per_hour, requests_per_s)}  # fmt: skip


def cost_section(doc: Mapping[str, Any], rates: Mapping[str, CostRate], currency: str) -> dict[str, Any]:
    """The report's ``cost`` section from the finished report ``doc`` (its engines, stages and
    slo_tiers sections): per target with a price, the cost at the measured throughput, at the
    stages' highest load meeting the run's SLOs, and per SLO tier (good tokens, max load)."""
    out: dict[str, Any] = {}
    stages = doc.get("stages") or {}
    tiers = (doc.get("slo_tiers") or {}).get("by_target") or {}
    for engine, section in sorted((doc.get("engines") or {}).items()):
        rate = rates.get(engine)
        if rate is None:
            continue
        hourly = rate.per_hour
        entry: dict[str, Any] = {
            "currency": currency, "gpu_hour_cost": rate.gpu_hour_cost, "gpus": rate.gpus, "cost_per_hour": hourly,
            "throughput": "engines.<target>.output_tokens_per_s and ok_per_s: ok requests over the measured window",
            "measured": _at(hourly, section.get("output_tokens_per_s"), section.get("ok_per_s")),
        }  # fmt: skip
        best = ((stages.get(engine) or {}).get("analysis") or {}).get("max_load_meeting_slos")
        if best is not None:
            row = next(
                (r for r in stages[engine].get("stages") or [] if r.get("name") == best.get("stage")), None
            )
            stats = (row or {}).get("stats") or {}
            entry["max_load_meeting_slos"] = {"stage": best.get("stage"), "level": best.get("level"),
                                              **_at(hourly, stats.get("output_tokens_per_s"),
                                                    stats.get("requests_per_s"))}  # fmt: skip
        # The cost curve of a sweep: each measured stage's throughput over its planned duration.
        rows = [r for r in (stages.get(engine) or {}).get("stages") or [] if not r.get("warmup")]
        if rows:
            entry["stages"] = [{"stage": r.get("name"), "level": r.get("level"),
                                **_at(hourly, (r.get("stats") or {}).get("output_tokens_per_s"),
                                      (r.get("stats") or {}).get("requests_per_s"))} for r in rows]  # fmt: skip
        per_tier = {}
        for tier in (tiers.get(engine) or {}).get("tiers") or []:
            whole = tier["whole_run"]
            figures: dict[str, Any] = {
                "good_output_tokens_per_s": whole.get("good_output_tokens_per_s"),
                "cost_per_1m_good_output_tokens": per_million(hourly, whole.get("good_output_tokens_per_s")),
            }
            top = tier.get("max_load")
            if top is not None:
                figures["max_load"] = {"stage": top["stage"], "level": top["level"],
                                       **_at(hourly, top.get("output_tokens_per_s"), top.get("requests_per_s")),
                                       "good_output_tokens_per_s": top.get("good_output_tokens_per_s"),
                                       "cost_per_1m_good_output_tokens":
                                           per_million(hourly, top.get("good_output_tokens_per_s"))}  # fmt: skip
            per_tier[tier["name"]] = figures
        if per_tier:
            entry["tiers"] = per_tier
        out[engine] = entry
    return out
