"""The ``tenants`` section recomputed from the raw log. A tenant's request carries the label
``<tenant>/<part>`` (docs/scenarios.md), so each line names its tenant and part. Per target and
tenant: requests, ok, judged, good (against the tenant's own SLO table when it has one, the
run's otherwise: the table the section states under ``slos``), SLO attainment, demand and
goodput per second over the target's tenant window (first send to last end), the share of
demand served well, TTFT p50; per part its stage-like cell; Jain's index over the tenants."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import NS_UNIT_MS, Verdict, compare_group
from loadkit.verify.rates import one_process
from loadkit.verify.rawlog import Run
from loadkit.verify.recompute import figures

NS_PER_S = 1_000_000_000
CELL_METRICS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "ttfat_ms")
THREE = (("p50", 500), ("p90", 900), ("p99", 990))


def tenant_window_s(rows: list[dict[str, Any]]) -> float | None:
    sends = [r["t_send_ns"] for r in rows]
    ends = [r["t_end_ns"] or r["t_send_ns"] for r in rows]
    span = max(ends) - min(sends)
    return span / NS_PER_S if span > 0 else None


def jain(values: list[float | None]) -> float | None:
    if not values or any(x is None for x in values):
        return None
    xs = [float(x) for x in values if x is not None]
    denom = len(xs) * sum(x * x for x in xs)
    return sum(xs) ** 2 / denom if denom else None


def tenants(run: Run, v: Verdict) -> None:
    report = (run.report.get("tenants") or {}).get("by_target")
    if report is None:
        return
    s = "tenants"
    rows = [r for r in run.rows if "/" in r["label"]]
    by_engine: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    for r in rows:
        tenant, _, part = r["label"].partition("/")
        by_engine.setdefault(r["engine"], {}).setdefault(tenant, {}).setdefault(part, []).append(r)
    v.exact(s, "*", "targets", sorted(report), sorted(by_engine))
    timed = one_process(run.rows)
    if not timed:
        v.notes.append(
            "tenants window_s and per-second rates because the raw log comes from several processes"
        )
    for engine, by_tenant in sorted(by_engine.items()):
        section = report.get(engine) or {}
        listed = section.get("tenants") or {}
        v.exact(s, engine, "tenants", sorted(listed), sorted(by_tenant))
        engine_rows = [r for parts in by_tenant.values() for part in parts.values() for r in part]
        seconds = tenant_window_s(engine_rows) if timed else None
        if timed:
            _maybe(v, s, engine, "window_s", section.get("window_s"), seconds)
        shares: list[float | None] = []
        for tenant, parts in sorted(by_tenant.items()):
            got = listed.get(tenant)
            if got is None:
                shares.append(None)
                continue
            shares.append(_tenant(v, f"{engine} / {tenant}", got, parts, seconds, timed))
        _maybe(v, s, engine, "jain_fairness", section.get("jain_fairness"), jain(shares))  # counts only


def _tenant(v: Verdict, key: str, got: dict[str, Any], parts: dict[str, list[dict[str, Any]]],
            seconds: float | None, timed: bool) -> float | None:  # fmt: skip
    """Check one tenant; its recomputed goodput share of demand (for Jain's index)."""
    s = "tenants"
    slos = {str(k): float(x) for k, x in (got.get("slos") or {}).items()}
    mine = [r for part in parts.values() for r in part]
    fig = figures(mine, slos, False)
    judged = fig.slo["judged"] if fig.slo else 0
    good = fig.slo["good"] if fig.slo else 0
    unknown = bool(fig.slo and fig.slo_unknown)
    v.exact(s, key, "requests", got.get("requests"), len(mine))
    v.exact(s, key, "ok", got.get("ok"), fig.counts["ok"])
    share = good / len(mine) if judged and mine else None
    if unknown:
        v.notes.append(f"tenants {key} judged, good and what follows from them because SLO keys "
                       f"{', '.join(fig.slo_unknown)} need what the raw log lacks")  # fmt: skip
        share = got.get("goodput_share_of_demand")
    else:
        v.exact(s, key, "judged", got.get("judged"), judged)
        v.exact(s, key, "good", got.get("good"), good)
        _maybe(v, s, key, "slo_attainment", got.get("slo_attainment"), good / judged if judged else None)
        _maybe(v, s, key, "goodput_share_of_demand", got.get("goodput_share_of_demand"), share)
        if timed:
            _maybe(v, s, key, "goodput_per_s", got.get("goodput_per_s"),
                   good / seconds if seconds and judged else None)  # fmt: skip
    if timed:
        _maybe(v, s, key, "demand_per_s", got.get("demand_per_s"), len(mine) / seconds if seconds else None)
    ttft = fig.values["ttft_ms"]
    if ttft:
        v.close(s, key, "ttft_ms_p50", got.get("ttft_ms_p50"), ttft[max(1, -(-500 * len(ttft) // 1000)) - 1],
                NS_UNIT_MS)  # fmt: skip
    else:
        v.exact(s, key, "ttft_ms_p50", got.get("ttft_ms_p50"), None)
    listed = got.get("parts") or {}
    v.exact(s, key, "parts", sorted(listed), sorted(parts))
    for part, part_rows in sorted(parts.items()):
        cell = listed.get(part)
        pkey = f"{key} / part {part}"
        part_fig = figures(part_rows, slos, False)
        compare_group(
            v, s, pkey, cell, part_fig, NS_UNIT_MS, CELL_METRICS, THREE, ("requests", "ok", "output_tokens")
        )
        if cell is None:
            continue
        asked = sum(r.get("n_in_target") or r["n_in"] or 0 for r in part_rows)
        v.close(s, pkey, "mean_input_tokens", cell.get("mean_input_tokens"), asked / len(part_rows), 0, False)
        if timed and not unknown:
            p_judged = part_fig.slo["judged"] if part_fig.slo else 0
            p_good = part_fig.slo["good"] if part_fig.slo else 0
            _maybe(
                v,
                s,
                pkey,
                "slo_attainment",
                cell.get("slo_attainment"),
                p_good / p_judged if p_judged else None,
            )
            _maybe(v, s, pkey, "requests_per_s", cell.get("requests_per_s"),
                   part_fig.counts["ok"] / seconds if seconds else None)  # fmt: skip
    return share


def _maybe(v: Verdict, section: str, key: str, figure: str, report: Any, mine: float | None) -> None:
    if mine is None or report is None:
        v.exact(section, key, figure, report, mine)
    else:
        v.close(section, key, figure, report, mine, 0, False)
