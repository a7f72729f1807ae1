"""The cost and SLO-tier sections as the console, report.html and ``loadkit compare`` show them
(report.json's ``cost`` and ``slo_tiers``: stats/cost.py, stats/tiers.py; docs/cost.md)."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import note, num, pct, section, table

TITLE = "Cost and SLO tiers"
# Rows of `loadkit compare` and paths of --fail-if (engine-section keys, added by engine_metrics).
COST_METRICS = ("cost_per_1m_output_tokens", "cost_per_1m_requests", "cost_per_1m_good_output_tokens")


def _f(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _level(row: dict[str, Any] | None) -> str:
    if not row:
        return "none met"
    kind = row.get("level_kind") or "level"
    return f"{row.get('stage')} ({kind} {row.get('level')})"


def console_lines(report: dict[str, Any]) -> list[str]:
    """A few lines per target: cost at the measured throughput, and per tier its attainment, max
    load and cost there."""
    lines: list[str] = []
    cost = report.get("cost") or {}
    for engine, c in sorted(cost.items()):
        m = c.get("measured") or {}
        lines.append(f"cost {engine}: {_f(c['cost_per_hour'], 2)} {c['currency']}/h ({c['gpus']} GPU x "
                     f"{c['gpu_hour_cost']:g}); per 1M output tokens {_f(m.get('cost_per_1m_output_tokens'))}, "
                     f"per 1M requests {_f(m.get('cost_per_1m_requests'))} {c['currency']} at the measured "
                     f"throughput ({_f(m.get('output_tokens_per_s'), 1)} tok/s)")  # fmt: skip
    tiers = (report.get("slo_tiers") or {}).get("by_target") or {}
    for engine, entry in sorted(tiers.items()):
        c = cost.get(engine) or {}
        for tier in entry.get("tiers") or []:
            whole, top = tier["whole_run"], tier.get("max_load")
            at = ((c.get("tiers") or {}).get(tier["name"]) or {}).get("max_load") or {}
            price = f"; {_f(at.get('cost_per_1m_output_tokens'))} {c['currency']}/1M tok there" if at else ""
            staged = f"; max load {_level(top)}{price}" if tier.get("stages") else ""
            limits = ",".join(f"{k}={v:g}" for k, v in tier["slos"].items())
            lines.append(f"tier {tier['name']} [{limits}] {engine}: attainment {pct(whole.get('attainment'))}"
                         f"{staged}")  # fmt: skip
    return lines


def html_section(report: dict[str, Any]) -> str:
    """Empty when the run gave no price and no tiers (most runs): nothing to say, no box."""
    cost = report.get("cost") or {}
    tiers = (report.get("slo_tiers") or {}).get("by_target") or {}
    if not cost and not tiers:
        return ""
    parts: list[Any] = []
    if cost:
        rows = []
        for engine, c in sorted(cost.items()):
            m, best = c.get("measured") or {}, c.get("max_load_meeting_slos") or {}
            rows.append([engine, f"{c['gpu_hour_cost']:g} × {c['gpus']}", num(c["cost_per_hour"], 2),
                         num(m.get("output_tokens_per_s")), num(m.get("cost_per_1m_output_tokens"), 3),
                         num(m.get("cost_per_1m_requests"), 3), _level(best) if best else "-",
                         num(best.get("cost_per_1m_output_tokens"), 3), c["currency"]])  # fmt: skip
        head = ("target", "GPU-hour price × GPUs", "cost / hour", "output tok/s (measured)",
                "per 1M output tokens", "per 1M requests", "max load meeting --slo", "per 1M output tokens there",
                "currency")  # fmt: skip
        parts.append(table(head, rows))
    if tiers:
        rows = []
        for engine, entry in sorted(tiers.items()):
            c = cost.get(engine) or {}
            for tier in entry.get("tiers") or []:
                whole, top = tier["whole_run"], tier.get("max_load") or {}
                costs = (c.get("tiers") or {}).get(tier["name"]) or {}
                rows.append([engine, tier["name"], ", ".join(f"{k} ≤ {v:g}" for k, v in tier["slos"].items()),
                             pct(whole.get("attainment")), _level(top) if tier.get("stages") else "not staged",
                             num(top.get("output_tokens_per_s")), num(top.get("goodput_rps"), 2),
                             num(costs.get("cost_per_1m_good_output_tokens"), 3),
                             num((costs.get("max_load") or {}).get("cost_per_1m_output_tokens"), 3)])  # fmt: skip
        head = ("target", "tier", "SLOs", "attainment (run)", "max load meeting the tier", "output tok/s there",
                "goodput req/s there", "per 1M good output tokens (run)", "per 1M output tokens at max load")  # fmt: skip
        parts.append(table(head, rows))
        target = (report.get("slo_tiers") or {}).get("attainment_target")
        parts.append(note(f"A tier is met at a stage when at least {pct(target, 0)} of its judged requests meet "
                          "every SLO of the tier; the max load is the highest such stage."))  # fmt: skip
    parts.append(note("Cost = GPU-hour price × GPUs ÷ the throughput measured on this load: not a price quote "
                      "(docs/cost.md)."))  # fmt: skip
    return section("cost", TITLE, *parts)


def engine_metrics(report: dict[str, Any], engine: str) -> dict[str, Any]:
    """What ``loadkit compare`` and --fail-if read beside an engine section: the cost per 1M
    (at the measured throughput; good tokens: of the run's --slo) and per tier its max level
    and attainment. Absent figures are None (not measured: a rule on one fires)."""
    c = (report.get("cost") or {}).get(engine) or {}
    m = c.get("measured") or {}
    tiers = ((report.get("slo_tiers") or {}).get("by_target") or {}).get(engine) or {}
    out: dict[str, Any] = {
        "cost_per_1m_output_tokens": m.get("cost_per_1m_output_tokens"),
        "cost_per_1m_requests": m.get("cost_per_1m_requests"),
        "cost_per_1m_good_output_tokens": ((c.get("tiers") or {}).get("run_slos") or {}).get(
            "cost_per_1m_good_output_tokens"
        ),
        "slo_tiers": {t["name"]: {"max_load": (t.get("max_load") or {}).get("level"),
                                  "attainment": t["whole_run"].get("attainment")}
                      for t in tiers.get("tiers") or []},
    }  # fmt: skip
    return out


def extra_metrics(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, ...]:
    """The compare rows beyond the table's: cost, then each tier either run has."""
    names = sorted({*(a.get("slo_tiers") or {}), *(b.get("slo_tiers") or {})})
    return COST_METRICS + tuple(f"slo_tiers.{n}.{k}" for n in names for k in ("max_load", "attainment"))
