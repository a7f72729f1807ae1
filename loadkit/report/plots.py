"""Report sections built around plots: CDFs, time series, server metrics (stages, length buckets
and turns: grouped.py)."""

from __future__ import annotations

import re
from typing import Any

from loadkit.report import analysis
from loadkit.report.htmlutil import macro, not_measured, note, section
from loadkit.report.rawdata import RawData
from loadkit.report.svg import Series, line_plot
from loadkit.report.tables import engines_of

# (plot id, report/raw-log metric, title); ITL is not in the raw log, so always from percentiles.
CDFS = (("ttft-cdf", "ttft_ms", "TTFT"), ("ttft-sched-cdf", "ttft_sched_ms", "TTFT from schedule"),
        ("tpot-cdf", "tpot_ms", "TPOT"), ("itl-cdf", "itl_ms", "ITL per token"), ("e2e-cdf", "e2e_ms", "E2E"))  # fmt: skip
RAW_METRICS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms")


def _cdf_series(report: dict[str, Any], raw: RawData | None, metric: str) -> tuple[list[Series], str]:
    series, sources = [], set()
    for i, (engine, s) in enumerate(engines_of(report).items()):
        if raw is not None and metric in RAW_METRICS and engine in raw.engines():
            xs, ys = analysis.cdf_from_values(raw.values(metric, engine))
            sources.add("raw log (every ok request)")
        else:
            xs, ys = analysis.cdf_from_summary(s.get(metric))
            sources.add("report percentiles (min, p50, p90, p95, p99, p99.9, max)")
        if xs:
            series.append(Series(engine, xs, ys, color=i))
    return series, " and ".join(sorted(sources))


def cdf_section(report: dict[str, Any], raw: RawData | None) -> str:
    parts = []
    for plot_id, metric, title in CDFS:
        if metric == "ttft_sched_ms" and not _scheduled(report):
            continue  # closed loop: identical to TTFT by definition
        series, source = _cdf_series(report, raw, metric)
        if not series:
            parts.append(not_measured(plot_id, f"{title}: no values in the report"))
            continue
        plot = line_plot(plot_id, f"{title} CDF", series, f"{title} (ms, log scale)",
                         "fraction of tokens" if metric == "itl_ms" else "fraction of requests",
                         x_log=True, y_lo=0.0, y_hi=1.0)  # fmt: skip
        parts.append(macro("figure", plot, f"From the {source}."))
    return section("cdfs", "Latency distributions (CDF)", *parts)


def _scheduled(report: dict[str, Any]) -> bool:
    """Open loop (a schedule was kept), or TTFT from schedule differs from TTFT anywhere."""
    cons = report.get("conservation") or {}
    if cons.get("open_loop") or cons.get("scheduled") is not None:
        return True
    return any(s.get("ttft_sched_ms") != s.get("ttft_ms") for s in engines_of(report).values())


def timeseries_section(report: dict[str, Any], raw: RawData | None) -> str:
    engines: dict[str, dict[str, Any]] = {
        e: s["timeseries"] for e, s in engines_of(report).items() if isinstance(s.get("timeseries"), dict)
    }
    parts: list[str] = []
    for plot_id, column, title, ylabel in (("throughput-ts", "output_tokens", "Output tokens/s", "tokens/s"),
                                           ("inflight-ts", "in_flight", "Requests in flight (mean per second)", "requests")):  # fmt: skip
        series = [Series(e, ts.get("t") or [], ts.get(column) or [], color=i)
                  for i, (e, ts) in enumerate(engines.items()) if ts.get(column)]  # fmt: skip
        parts.append(line_plot(plot_id, title, series, "seconds since start", ylabel, y_lo=0.0) if series
                     else not_measured(plot_id, f"{title}: the report has no time series"))  # fmt: skip
    parts.append(_ttft_ts(report, raw))
    return section("timeseries", "Over time", *parts)


def _ttft_ts(report: dict[str, Any], raw: RawData | None) -> str:
    if raw is None:
        return not_measured("ttft-ts", "TTFT percentiles over time need the raw log (--raw-log)")
    series = []
    for i, engine in enumerate(engines_of(report)):
        ts = analysis.ttft_over_time(raw, engine)
        if ts["t"]:
            series += [Series(f"{engine} p50", ts["t"], ts["p50"], color=i),
                       Series(f"{engine} p99", ts["t"], ts["p99"], color=i, dashed=True)]  # fmt: skip
    if not series:
        return not_measured("ttft-ts", "no ok request with a first token in the raw log")
    return (line_plot("ttft-ts", "TTFT percentiles over time (by first-token arrival)", series,
                      "seconds since the first request", "TTFT ms", y_lo=0.0)
            + note("Time axis: each raw-log file's monotonic clock from its own first send."))  # fmt: skip


def server_metrics_of(report: dict[str, Any]) -> dict[str, Any] | None:
    found = report.get("server_metrics") or (report.get("manifest") or {}).get("server_metrics")
    return found if isinstance(found, dict) and found else None


def _server_series(metrics: dict[str, Any], order: list[str]) -> tuple[dict[str, list[Series]], int]:
    """Per neutral metric name, one series per target; t relative to the earliest sample."""
    samples = {t: [s for s in (sec.get("samples") or []) if isinstance(s, dict)] for t, sec in metrics.items()
               if isinstance(sec, dict)}  # fmt: skip
    times = [s["t"] for rows in samples.values() for s in rows if isinstance(s.get("t"), int | float)]
    t0 = min(times) if times else 0.0
    errors = sum(1 for rows in samples.values() for s in rows if s.get("error"))
    by_name: dict[str, list[Series]] = {}
    for target, rows in samples.items():
        i = order.index(target) if target in order else len(order) + list(samples).index(target)
        names = sorted({k for s in rows for k in (s.get("values") or {})})
        for name in names:
            pts = [
                (s["t"] - t0, (s.get("values") or {}).get(name))
                for s in rows
                if isinstance(s.get("t"), int | float)
            ]
            pts = [(t, float(v)) for t, v in pts if isinstance(v, int | float)]
            by_name.setdefault(name, []).append(
                Series(target, [p[0] for p in pts], [p[1] for p in pts], i, markers=len(pts) < 3)
            )
    return by_name, errors


RATIO_METRICS = ("kv_usage", "prefix_hit_rate", "prefix_hit_rate_interval")
PREFERRED = ("running", "waiting", "kv_usage", "prefix_hit_rate", "prefix_hit_rate_interval")


def server_metrics_section(report: dict[str, Any]) -> str:
    title = "Server metrics scraped during the run"
    metrics = server_metrics_of(report)
    if metrics is None:
        return section("server", title, not_measured("server-metrics", "no server metrics were scraped "
                                                      "(engine exposes none, or --scrape-interval 0)"))  # fmt: skip
    by_name, errors = _server_series(metrics, list(engines_of(report)))
    names = sorted(by_name, key=lambda n: (PREFERRED.index(n) if n in PREFERRED else len(PREFERRED), n))
    # One time axis for every server plot, so a queue spike lines up across them.
    t_end = max((float(x) for ss in by_name.values() for s in ss for x in s.xs if x is not None), default=1.0)
    plots = [line_plot(f"server-{re.sub(r'[^a-z0-9_-]+', '-', n.lower())}", n, by_name[n], "seconds since first scrape", n,
                       x_lo=0.0, x_hi=max(t_end, 1.0), y_lo=0.0, y_hi=1.0 if n in RATIO_METRICS else None)
             for n in names if any(s.xs for s in by_name[n])]  # fmt: skip
    if not plots:
        plots = [not_measured("server-metrics", "every scrape failed or returned no known metric")]
    return section("server", title, note(f"{len(metrics)} target(s); {errors} failed scrape(s)."), *plots)
