"""The report's "Tenants and fairness" section: per-tenant goodput, SLO attainment, Jain's index."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import note, num, pct, section, table

TITLE = "Tenants and fairness"
HEAD = (
    "target",
    "tenant",
    "priority",
    "arrival asked",
    "requests",
    "demand /s",
    "goodput /s",
    "SLOs judged",
    "SLO attainment",
    "good / demand",
    "TTFT p50 ms",
    "long vs short TTFT p50",
    "long vs short E2E p50",
)


def tenants_section(report: dict[str, Any]) -> str:
    """Empty when the scenario declares no tenants (most runs): nothing to say, no box."""
    data = report.get("tenants")
    if not data or not data.get("by_target"):
        return ""
    rows, notes = [], []
    for engine, target in data["by_target"].items():
        jf = target.get("jain_fairness")
        notes.append(
            f"{engine}: Jain's fairness index over tenants (good / demand) = "
            f"{'not measured' if jf is None else f'{jf:.3f}'}"
        )
        rows += [_row(engine, name, t) for name, t in target["tenants"].items()]
    return section(
        "tenants",
        TITLE,
        table(HEAD, rows),
        *(note(n) for n in notes),
        note(
            "Long vs short: the tenant's part with the longest mean prompt over the one with the "
            "shortest (p50 ratios)."
        ),
    )


def _row(engine: str, name: str, t: dict[str, Any]) -> list[str]:
    lvs = t.get("long_vs_short") or {}
    return [
        engine,
        name,
        num(t.get("priority")),
        arrival_text(t.get("arrival_asked")),
        num(t["requests"]),
        num(t["demand_per_s"], 2),
        num(t["goodput_per_s"], 2),
        slos_text(t),
        pct(t["slo_attainment"]),
        num(t["goodput_share_of_demand"], 3),
        num(t["ttft_ms_p50"]),
        num(lvs.get("ttft_p50_ratio"), 2),
        num(lvs.get("e2e_p50_ratio"), 2),
    ]


def arrival_text(arrival: dict[str, Any] | None) -> str:
    """A tenant's own process ("poisson 8/s", "gamma 5/s cv 2"); "shared" when it has none."""
    if not arrival:
        return "shared"
    cv = f" cv {arrival['cv']:g}" if "cv" in arrival else ""
    return f"{arrival['model']} {arrival['rate']:g}/s{cv}"


def slos_text(t: dict[str, Any]) -> str:
    """The SLOs the tenant was judged against, and whose they are ("ttft_ms<=150 (own)")."""
    slos = t.get("slos")
    if not slos:
        return "-"
    limits = ", ".join(f"{k}<={v:g}" for k, v in slos.items())
    return f"{limits} ({'own' if t.get('slos_from') == 'tenant' else 'run'})"
