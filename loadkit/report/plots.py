"""Report sections built around plots: CDFs, time series, stages, length buckets, turns, server metrics."""

from __future__ import annotations

import re
from typing import Any

from loadkit.report import analysis
from loadkit.report.htmlutil import macro, not_measured, note, num, pct, section, table
from loadkit.report.rawdata import RawData
from loadkit.report.svg import Bars, Series, bar_plot, color, line_plot
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


def stages_section(report: dict[str, Any], raw: RawData | None) -> str:
    title = "Latency–throughput over sweep stages"
    if raw is None:
        return section("stages", title, not_measured("latency-throughput", "needs the raw log (--raw-log)"))
    per_engine = {e: analysis.stages(raw, e) for e in engines_of(report)}
    per_engine = {e: rows for e, rows in per_engine.items() if rows}
    if not per_engine:
        return section(
            "stages",
            title,
            not_measured("latency-throughput", "the raw log names no stages (open-loop arrival stages)"),
        )
    series, rows = [], []
    for i, (engine, stage_rows) in enumerate(per_engine.items()):
        pts = [r for r in stage_rows if r.output_tokens_per_s is not None and r.ttft_p99 is not None]
        series += [Series(f"{engine} TTFT p50", [r.output_tokens_per_s for r in pts], [r.ttft_p50 for r in pts], i, markers=True),
                   Series(f"{engine} TTFT p99", [r.output_tokens_per_s for r in pts], [r.ttft_p99 for r in pts], i, True, True)]  # fmt: skip
        rows += [[engine, r.stage, num(r.sent), num(r.ok), num(r.window_s), num(r.requests_per_s, 2),
                  num(r.output_tokens_per_s), num(r.ttft_p50), num(r.ttft_p99), num(r.tpot_p50)] for r in stage_rows]  # fmt: skip
    plot = line_plot("latency-throughput", "TTFT vs achieved output tokens/s, one point per stage", series,
                     "output tokens/s achieved in the stage", "TTFT ms", y_lo=0.0)  # fmt: skip
    head = (
        "engine",
        "stage",
        "sent",
        "ok",
        "window s",
        "req/s",
        "output tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
    )
    single = (
        note("Only one stage: a single point; sweep stages draw the curve.")
        if all(len(r) == 1 for r in per_engine.values())
        else ""
    )
    return section("stages", title, plot, single, table(head, rows))


def buckets_section(report: dict[str, Any], raw: RawData | None) -> str:
    title = "Percentiles per input-length bucket"
    if raw is None:
        return section("buckets", title, not_measured("length-buckets", "needs the raw log (--raw-log)"))
    per_engine = {e: analysis.length_buckets(raw, e) for e in engines_of(report)}
    labels = [
        b
        for _, b in analysis.LENGTH_BUCKETS
        if any(r.bucket == b for rows in per_engine.values() for r in rows)
    ]
    if not labels:
        return section(
            "buckets", title, not_measured("length-buckets", "no ok request with a known input length")
        )
    groups, rows = [], []
    for i, (engine, brows) in enumerate(per_engine.items()):
        by = {r.bucket: r for r in brows}
        groups += [Bars(f"{engine} TTFT p50", [_get(by, b, "ttft_p50") for b in labels], color(i)),
                   Bars(f"{engine} TTFT p99", [_get(by, b, "ttft_p99") for b in labels], color(i), 0.45)]  # fmt: skip
        rows += [[engine, r.bucket, num(r.count), num(r.ttft_p50), num(r.ttft_p99), num(r.tpot_p50),
                  num(r.tpot_p99), num(r.e2e_p50)] for r in brows]  # fmt: skip
    plot = bar_plot("length-buckets", "TTFT by input length (tokens)", labels, groups, "TTFT ms")
    head = (
        "engine",
        "input tokens",
        "ok requests",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "E2E p50",
    )
    return section("buckets", title, plot, table(head, rows))


def _get(by: dict[str, Any], bucket: str, attr: str) -> float | None:
    row = by.get(bucket)
    return None if row is None else getattr(row, attr)


def turns_section(report: dict[str, Any], raw: RawData | None) -> str:
    title = "TTFT per session turn"
    per_engine = _turn_rows(report, raw)
    sessions = _sessions_table(report)
    if not per_engine:
        why = (
            "the run had no multi-turn sessions"
            if raw is not None or report.get("sessions")
            else "needs the raw log (--raw-log) or the report's sessions section"
        )
        return section("turns", title, not_measured("ttft-turn", why), sessions)
    series, rows = [], []
    for i, (engine, trows) in enumerate(per_engine.items()):
        series += [Series(f"{engine} p50", [t[0] for t in trows], [t[2] for t in trows], i, markers=True),
                   Series(f"{engine} p90", [t[0] for t in trows], [t[3] for t in trows], i, True, True)]  # fmt: skip
        rows += [[engine, num(t[0]), num(t[1]), num(t[2]), num(t[3]), num(t[4])] for t in trows]
    plot = line_plot("ttft-turn", "TTFT by turn index (later turns should hit the prefix cache)", series,
                     "turn", "TTFT ms", y_lo=0.0, x_integer=True)  # fmt: skip
    source = note("From the raw log." if raw is not None else "From the report's sessions section.")
    return section("turns", title, plot, source,
                   table(("engine", "turn", "ok requests", "TTFT p50", "TTFT p90", "TTFT p99"), rows), sessions)  # fmt: skip


TurnRow = tuple[int, int, float | None, float | None, float | None]


def _turn_rows(report: dict[str, Any], raw: RawData | None) -> dict[str, list[TurnRow]]:
    if raw is not None:
        found = {e: analysis.per_turn(raw, e) for e in engines_of(report)}
        return {e: rows for e, rows in found.items() if rows}
    out: dict[str, list[TurnRow]] = {}
    for engine, sec in _sessions(report).items():
        turns = _turns(sec)
        rows: list[TurnRow] = [(int(t), int(v.get("ok") or 0), _ttft(v, "p50"), _ttft(v, "p90"), _ttft(v, "p99"))
                               for t, v in sorted(turns.items(), key=lambda kv: int(kv[0]))]  # fmt: skip
        if rows:
            out[engine] = rows
    return out


def _turns(sec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    turns = sec.get("turns")
    if not isinstance(turns, dict):
        return {}
    return {str(t): v for t, v in turns.items() if str(t).isdigit() and isinstance(v, dict)}


def _ttft(turn: dict[str, Any], q: str) -> float | None:
    summary = turn.get("ttft_ms")
    return summary.get(q) if isinstance(summary, dict) else None


def _sessions(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = report.get("sessions")
    return {e: v for e, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}


def _sessions_table(report: dict[str, Any]) -> str:
    """Session outcomes and prefix-cache ratios per turn, from the report's sessions section."""
    rows = []
    for engine, sec in _sessions(report).items():
        for t, v in sorted(_turns(sec).items(), key=lambda kv: int(kv[0])):
            rows.append([engine, str(t), num(v.get("requests")), num(v.get("ok")),
                         pct(v.get("prefix_expected_ratio")), pct(v.get("prefix_reported_ratio"))])  # fmt: skip
    if not rows:
        return ""
    summary = "; ".join(f"{e}: {v.get('sessions')} sessions, {v.get('completed')} completed, {v.get('broken')} broken"
                        for e, v in _sessions(report).items())  # fmt: skip
    return note(summary) + table(
        ("engine", "turn", "requests", "ok", "prefix expected", "prefix reported (cached)"), rows
    )


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
