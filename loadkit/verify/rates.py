"""Windows and rates: the report divides counts by each group's window, first start to last
end (docs/metrics.md: the window runs from t_start, connection set-up included). The report
takes those times on the wall clock, the raw log on the monotonic one; one process converts
one to the other with a single offset, so its windows can be recomputed exactly. Lines from
several processes (workers, perhaps on other machines) are left unchecked."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.recompute import Figures

NS_PER_S = 1_000_000_000


def one_process(rows: list[dict[str, Any]]) -> bool:
    return len({r.get("worker") for r in rows}) <= 1


def window_s(rows: list[dict[str, Any]]) -> float | None:
    """Seconds from the first request's start to the last one's end (or last event, or start)."""
    starts, ends = [], []
    for r in rows:
        start = r.get("t_start_ns") or r["t_send_ns"]
        if not start or start <= 0:
            continue
        end = (
            r["t_end_ns"]
            if r["t_end_ns"] is not None
            else r["t_last_ns"]
            if r["t_last_ns"] is not None
            else start
        )
        starts.append(start)
        ends.append(max(end, start))
    return (max(ends) - min(starts)) / NS_PER_S if starts else None


def compare_rates(v: Verdict, section: str, key: str, report: dict[str, Any] | None, fig: Figures,
                  seconds: float | None, with_window: bool = True) -> None:  # fmt: skip
    """window_s and the per-second rates of one group, over ``seconds`` (its engine's window)."""
    if report is None or seconds is None:
        return
    if with_window:
        v.close(section, key, "window_s", report.get("window_s"), seconds, 1e-9, False)
    c = fig.counts
    rates = [
        ("requests_per_s", c["requests"]),
        ("ok_per_s", c["ok"]),
        ("output_tokens_per_s", c["output_tokens"]),
    ]
    good = fig.slo["good"] if fig.slo is not None and not fig.slo_unknown else None
    if good is not None:
        rates.append(("goodput_per_s", good))
    for name, n in rates:
        if name in report:
            v.close(section, key, name, report[name], n / seconds, 0, False)
    slo = report.get("slo")
    if good is not None and isinstance(slo, dict) and "goodput_per_s" in slo:
        v.close(section, key, "slo.goodput_per_s", slo["goodput_per_s"], good / seconds, 0, False)
