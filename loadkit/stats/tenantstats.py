"""Per-tenant results and fairness: goodput, SLO attainment, Jain's index, long vs short slowdown.

Requests of a scenario with ``[[tenants]]`` carry the label ``<tenant>/<part>``. Cells per
(target, tenant, part) reuse the stage cells (exact-merge histograms, SLO judgement as in
stagestats.py), so workers' shares sum exactly. Per target the section gives, for each tenant:
requests (its demand), SLO attainment, goodput, goodput normalised by demand (good / sent),
and — between the tenant's part with the longest mean prompt and the one with the shortest —
the ratio of TTFT p50 and of E2E p50 ("long vs short": does batching hurt one tenant's long
requests more than another's?). Jain's fairness index over tenants is taken on the normalised
goodput: (Σx)² / (n·Σx²), 1 when every tenant gets the same share of its demand served well.
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats import wallclock
from loadkit.stats.metrics import Compiled, SloLike
from loadkit.stats.stagestats import StageCell

NS = 1_000_000_000


class TenantStats:
    def __init__(self) -> None:
        self.cells: dict[tuple[str, str, str], StageCell] = {}
        self.input_tokens: dict[tuple[str, str, str], int] = {}
        self.span: dict[str, list[int]] = {}  # engine -> [first send, last end], Unix ns
        self.wall_offset_ns = wallclock.wall_offset_ns()

    def add(
        self,
        r: RequestRecord,
        slos: SloLike | Compiled | None,
        own: dict[str, SloLike | Compiled] | None = None,
    ) -> None:
        """``own``: the tenants' own SLO tables; a tenant's replaces the run's ``slos`` (both
        judged by metrics.meets, as in every view)."""
        tenant, sep, part = r.label.partition("/")
        if not sep:
            return
        key = (r.engine, tenant, part)
        self.cells.setdefault(key, StageCell()).add(r, own.get(tenant, slos) if own else slos)
        self.input_tokens[key] = self.input_tokens.get(key, 0) + (r.n_in_target or r.n_in or 0)
        send = r.t_send_ns + self.wall_offset_ns
        end = (r.t_end_ns or r.t_send_ns) + self.wall_offset_ns
        span = self.span.setdefault(r.engine, [send, end])
        span[0], span[1] = min(span[0], send), max(span[1], end)

    def merge(self, other: TenantStats) -> None:
        for key, cell in other.cells.items():
            self.cells.setdefault(key, StageCell()).merge(cell)
            self.input_tokens[key] = self.input_tokens.get(key, 0) + other.input_tokens[key]
        for engine, (a, b) in other.span.items():
            span = self.span.setdefault(engine, [a, b])
            span[0], span[1] = min(span[0], a), max(span[1], b)

    def to_wire(self) -> dict[str, Any]:
        return {
            "cells": [[*k, c.to_wire(), self.input_tokens[k]] for k, c in self.cells.items()],
            "span": self.span,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TenantStats:
        out = cls()
        for engine, tenant, part, cell, tokens in data.get("cells", []):
            key = (str(engine), str(tenant), str(part))
            out.cells[key] = StageCell.from_wire(cell)
            out.input_tokens[key] = int(tokens)
        out.span = {str(e): [int(a), int(b)] for e, (a, b) in (data.get("span") or {}).items()}
        return out

    def report(
        self, priorities: dict[str, int | None], declared: dict[str, dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """``declared``: per tenant, what the scenario says of it (its SLOs, its arrival), shown as is."""
        by_engine: dict[str, Any] = {}
        for engine in sorted({k[0] for k in self.cells}):
            a, b = self.span[engine]
            seconds = (b - a) / NS if b > a else None
            tenants = {
                t: {**self._tenant(engine, t, seconds, priorities.get(t)), **(declared or {}).get(t, {})}
                for t in sorted({k[1] for k in self.cells if k[0] == engine})
            }
            by_engine[engine] = {
                "window_s": seconds,
                "tenants": tenants,
                "jain_fairness": jain([t["goodput_share_of_demand"] for t in tenants.values()]),
            }
        return {"by_target": by_engine}

    def _tenant(
        self, engine: str, tenant: str, seconds: float | None, priority: int | None
    ) -> dict[str, Any]:
        keys = [k for k in self.cells if k[0] == engine and k[1] == tenant]
        total = StageCell()
        for k in keys:
            total.merge(self.cells[k])
        parts = {
            k[2]: {
                **self.cells[k].summary(seconds),
                "mean_input_tokens": self.input_tokens[k] / self.cells[k].requests,
            }
            for k in keys
        }
        out = {
            "priority": priority,
            "requests": total.requests,
            "ok": total.ok,
            "judged": total.judged,
            "good": total.good,
            "slo_attainment": total.good / total.judged if total.judged else None,
            "demand_per_s": total.requests / seconds if seconds else None,
            "goodput_per_s": total.good / seconds if seconds and total.judged else None,
            "goodput_share_of_demand": total.good / total.requests
            if total.judged and total.requests
            else None,
            "ttft_ms_p50": total.summary(seconds)["ttft_ms"]["p50"],
            "parts": parts,
        }
        out["long_vs_short"] = long_vs_short(parts)
        return out


def long_vs_short(parts: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """TTFT and E2E p50 of the part with the longest mean prompt over the shortest's."""
    if len(parts) < 2:
        return None
    order = sorted(parts, key=lambda p: parts[p]["mean_input_tokens"])
    short, long = parts[order[0]], parts[order[-1]]

    def ratio(metric: str) -> float | None:
        a, b = long[metric]["p50"], short[metric]["p50"]
        return a / b if a is not None and b else None

    return {
        "long": order[-1],
        "short": order[0],
        "ttft_p50_ratio": ratio("ttft_ms"),
        "e2e_p50_ratio": ratio("e2e_ms"),
    }


def jain(values: list[float | None]) -> float | None:
    """Jain's fairness index of the measured values; None unless every tenant was measured."""
    if not values or any(v is None for v in values):
        return None
    xs = [float(v) for v in values if v is not None]
    denom = len(xs) * sum(x * x for x in xs)
    return sum(xs) ** 2 / denom if denom else None


def console_lines(report: dict[str, Any]) -> list[str]:
    section = report.get("tenants") or {}
    lines = []
    for engine, data in (section.get("by_target") or {}).items():
        jf = data["jain_fairness"]
        lines.append(
            f"tenants {engine}: Jain fairness {'-' if jf is None else f'{jf:.3f}'} (goodput / demand)"
        )
        for name, t in data["tenants"].items():
            share, att = t["goodput_share_of_demand"], t["slo_attainment"]
            lvs = t["long_vs_short"] or {}
            own = " (own SLOs)" if t.get("slos_from") == "tenant" else ""
            lines.append(
                f"  {name} (priority {t['priority']}): {t['requests']} req, SLO met{own} "
                f"{'-' if att is None else f'{100 * att:.1f}%'}, good/demand "
                f"{'-' if share is None else f'{share:.3f}'}, TTFT p50 {_f(t['ttft_ms_p50'])} ms, "
                f"long/short TTFT {_f(lvs.get('ttft_p50_ratio'))}x"
            )
    return lines


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
