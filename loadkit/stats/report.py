"""Build the ``loadkit.report/1`` document from node snapshots (docs/metrics.md is its schema)."""

from __future__ import annotations

import time
from typing import Any

from loadkit.stats.aggregate import GroupStats
from loadkit.stats.distributed import NodeSnapshot
from loadkit.stats.gpu import gpu_fields
from loadkit.stats.histogram import Histogram
from loadkit.stats.metrics import TIME_METRICS, TOKEN_METRICS, Slo
from loadkit.stats.series import NS_PER_S
from loadkit.stats.turns import give_way
from loadkit.stats.validity import DEFAULT_MAX_FAILED_SHARE, invalid_reasons
from loadkit.types import CANCELLED, OK

SCHEMA = "loadkit.report/1"
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))


def summary(hist: Histogram, scale: float = 1.0) -> dict[str, Any]:
    """S = {count, mean, min, max, p50, p90, p95, p99, p999}, values divided by ``scale``."""
    out: dict[str, Any] = {"count": hist.count}
    mean = hist.mean
    out["mean"] = None if mean is None else mean / scale
    out["min"] = None if hist.min is None else hist.min / scale
    out["max"] = None if hist.max is None else hist.max / scale
    values = hist.percentiles([q for _, q in QUANTILES])
    for (name, _), value in zip(QUANTILES, values, strict=True):
        out[name] = None if value is None else value / scale
    return out


def merge_nodes(nodes: list[NodeSnapshot]) -> dict[tuple[str, str], GroupStats]:
    merged: dict[tuple[str, str], GroupStats] = {}
    for node in nodes:
        for key, group in node.groups.items():
            merged.setdefault(key, GroupStats()).merge(group)
            give_way()
    return merged


def _rate(n: int, seconds: float | None) -> float | None:
    return None if not seconds else n / seconds


def window_s(group: GroupStats) -> float | None:
    """Measured window: first send to last end of the group's requests, in seconds."""
    if group.first_send_wall_ns is None or group.last_end_wall_ns is None:
        return None
    return (group.last_end_wall_ns - group.first_send_wall_ns) / NS_PER_S


def slo_section(group: GroupStats, slos: tuple[Slo, ...], seconds: float | None) -> dict[str, Any] | None:
    if not slos:
        return None
    attainment = {}
    for slo in slos:
        met, violated, unmeasured = group.slo_counts.get(slo.key, [0, 0, 0])
        attainment[slo.key] = {"limit_ms": slo.limit_ms, "met": met, "violated": violated,
                               "not_measured": unmeasured,
                               "attainment": met / group.judged if group.judged else None}  # fmt: skip
    return {"good": group.good, "judged": group.judged,
            "goodput_per_s": _rate(group.good, seconds),
            "good_fraction": group.good / group.judged if group.judged else None,
            "attainment": attainment}  # fmt: skip


def group_section(group: GroupStats, slos: tuple[Slo, ...], seconds: float | None) -> dict[str, Any]:
    ok, cancelled = group.outcomes.get(OK, 0), group.outcomes.get(CANCELLED, 0)
    slo = slo_section(group, slos, seconds)
    section: dict[str, Any] = {
        # Requests the test stopped are cancelled, not failed: the server did nothing wrong.
        "requests": group.sent, "ok": ok, "failures": group.sent - ok - cancelled, "cancelled": cancelled,
        "outcomes": dict(sorted(group.outcomes.items())),
        "error_messages": group.messages.section(group.outcomes),
        "stream_ends": dict(sorted(group.ends.items())),
        "output_tokens": group.output_tokens, "output_tokens_all_outcomes": group.output_tokens_all,
        "input_tokens": group.input_tokens, "cached_tokens": group.cached_tokens,
        "window_s": seconds, "requests_per_s": _rate(group.sent, seconds), "ok_per_s": _rate(ok, seconds),
        "output_tokens_per_s": _rate(group.output_tokens, seconds),
        "goodput_per_s": None if slo is None else slo["goodput_per_s"], "slo": slo,
        "n_out_sources": dict(sorted(group.n_out_sources.items())),
        "server_breakdown": group.breakdown.section(),
    }  # fmt: skip
    for name in TIME_METRICS:
        section[name] = summary(group.hists[name], 1e6)
        give_way()
    for name in TOKEN_METRICS:
        section[name] = summary(group.hists[name])
        give_way()
    clamped = {n: h.clamped for n, h in group.hists.items() if h.clamped}
    if clamped:
        section["negative_values_clamped"] = clamped
    return section


def engines_section(merged: dict[tuple[str, str], GroupStats], slos: tuple[Slo, ...],
                    start_second: int) -> dict[str, Any]:  # fmt: skip
    by_engine: dict[str, dict[str, GroupStats]] = {}
    for (engine, label), group in sorted(merged.items()):
        by_engine.setdefault(engine, {})[label] = group
    engines: dict[str, Any] = {}
    for engine, labels in by_engine.items():
        total = GroupStats()
        for group in labels.values():
            total.merge(group)
            give_way()
        seconds = window_s(total)
        section = group_section(total, slos, seconds)
        # Label rates use the engine's window: they are shares of the engine's throughput.
        section["labels"] = {label: group_section(g, slos, seconds) for label, g in labels.items()}
        section["timeseries"] = total.series.columns(start_second)
        if total.series.dropped:
            section["timeseries_dropped_requests"] = total.series.dropped
        engines[engine] = section
    return engines


def conservation(nodes: list[NodeSnapshot], merged: dict[tuple[str, str], GroupStats], stopped: bool,
                 lost: list[NodeSnapshot]) -> dict[str, Any]:  # fmt: skip
    """scheduled = sent + dropped (once add_scheduled was used) and sent = Σ outcomes.

    While a run is live, requests in flight are scheduled but not yet sent-and-finished: the
    check then only asks that none is negative; once stopped, in_flight must be 0 except for
    the requests lost workers had in flight at their last snapshot (``lost_in_flight``).
    """
    scheduled = sum(n.scheduled for n in nodes)
    dropped = sum(n.dropped for n in nodes)
    sent = sum(g.sent for g in merged.values())
    outcomes_total = sum(sum(g.outcomes.values()) for g in merged.values())
    counted = scheduled > 0 or dropped > 0
    in_flight = scheduled - sent - dropped if counted else 0
    lost_in_flight = sum(n.scheduled - n.dropped - sum(g.sent for g in n.groups.values()) for n in lost)
    settled = in_flight == (lost_in_flight if counted else 0)
    holds = sent == outcomes_total and (settled or (not stopped and in_flight >= lost_in_flight))
    return {"scheduled": scheduled if counted else None, "sent": sent, "dropped": dropped,
            "outcomes_total": outcomes_total, "in_flight": in_flight, "lost_in_flight": lost_in_flight,
            "holds": holds}  # fmt: skip


def build_report(nodes: list[NodeSnapshot], *, manifest: dict[str, Any], slos: tuple[Slo, ...],
                 workers: list[dict[str, Any]], extra_errors: list[str], start_wall_ns: int,
                 stopped: bool = True, lost_nodes: list[NodeSnapshot] | None = None,
                 marked_invalid: list[str] | None = None,
                 max_failed_share: float = DEFAULT_MAX_FAILED_SHARE) -> dict[str, Any]:  # fmt: skip
    """Merge every node's snapshot (lost workers' included) into one report document.
    ``marked_invalid``: reasons found outside the nodes' snapshots (e.g. a start error)."""
    merged = merge_nodes(nodes)
    errors = [e for n in nodes for e in n.errors] + list(extra_errors)
    warnings = list(dict.fromkeys(w for n in nodes for w in n.warnings))
    lost = [w for w in workers if w["status"] == "lost"]
    for w in lost:
        warnings.append(f"worker {w['index']} ({w['client_id']}) lost at unix {w['lost_at_unix']:.3f}: "
                        f"{w['lost_reason']}; its data up to snapshot {w['last_seq']} is kept")  # fmt: skip
    cons = conservation(nodes, merged, stopped, lost_nodes or [])
    if not cons["holds"]:
        warnings.append(f"conservation does not hold: {cons}")
    engines = engines_section(merged, slos, start_wall_ns // NS_PER_S)
    marked = [r for n in nodes for r in n.invalid] + list(marked_invalid or [])
    reasons = invalid_reasons(marked=marked, errors=errors, conservation=cons, lost=lost, engines=engines,
                              stopped=stopped, max_failed_share=max_failed_share)  # fmt: skip
    return {
        "schema": SCHEMA,
        "generated_unix": time.time(),
        "valid": not reasons,
        "invalid_reasons": reasons,
        "errors": errors,
        "warnings": warnings,
        "manifest": manifest,
        "conservation": cons,
        "workers": {"count": len(workers), "lost": len(lost), "nodes": workers},
        "engines": engines,
        **gpu_fields(manifest, merged),  # "gpu", when the run had a GPU source (stats/gpu.py)
    }
