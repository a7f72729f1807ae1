"""The ``kinds`` section recomputed from the raw log: per target and request kind, counts,
failures by outcome, latency and latency-per-item percentiles (nearest rank, against the
report's histograms within their stated error), items, input tokens, batch sizes (exact) and
the rates over the target's window; and the conservation across kinds: each target's kinds'
requests add up to its engine's, and every line is in exactly one kind's row."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import NS_UNIT_MS, Verdict
from loadkit.verify.figures import NS_PER_MS, latency_per_item_ns, nearest_rank, rank
from loadkit.verify.rates import engine_slack_s, window_s
from loadkit.verify.rawlog import Run
from loadkit.verify.recompute import group_by

THREE = (("p50", 500), ("p90", 900), ("p99", 990))
SECTION = "kinds"


def kinds(run: Run, v: Verdict) -> None:
    section = run.report.get("kinds")
    if section is None:
        v.notes.append("the kinds section: report.json has none (a report from before it)")
        return
    rows = {(r["target"], r["kind"]): r for r in section.get("rows") or []}
    by_key = group_by(run.rows, "engine", "kind")
    recomputed = {(e, k or "chat"): mine for (e, k), mine in by_key.items()}
    v.exact(SECTION, "*", "rows", sorted(rows), sorted(recomputed))
    v.exact(SECTION, "*", "Σ requests", sum(r["requests"] for r in rows.values()), len(run.rows))
    for engine, eng in (run.report.get("engines") or {}).items():
        mine = sum(r["requests"] for (e, _), r in rows.items() if e == engine)
        v.exact(SECTION, engine, "Σ requests of its kinds = the engine's", mine, eng.get("requests"))
    slack = engine_slack_s(run)
    windows = (
        {e: window_s(g) for (e,), g in group_by(run.rows, "engine").items()} if slack is not None else {}
    )
    for key, lines in sorted(recomputed.items()):
        report = rows.get(key)
        if report is not None:
            _row(v, f"{key[0]} / {key[1]}", report, lines, windows.get(key[0]), slack or 0.0)


def _row(v: Verdict, key: str, report: dict[str, Any], lines: list[dict[str, Any]], seconds: float | None,
         slack_s: float) -> None:  # fmt: skip
    ok = [r for r in lines if r["outcome"] == "ok"]
    failures: dict[str, int] = {}
    for r in lines:
        if r["outcome"] != "ok":
            failures[r["outcome"]] = failures.get(r["outcome"], 0) + 1
    v.exact(SECTION, key, "requests", report["requests"], len(lines))
    v.exact(SECTION, key, "ok", report["ok"], len(ok))
    v.exact(SECTION, key, "failures", report["failures"], failures)
    latency = sorted(r["t_end_ns"] - r["t_send_ns"] for r in ok if r["t_end_ns"] is not None)
    per_item = sorted(x for r in ok if (x := latency_per_item_ns(r)) is not None)
    for name, values in (("latency_ms", latency), ("latency_per_item_ms", per_item)):
        got = report.get(name) or {}
        v.exact(SECTION, key, f"{name}.count", got.get("count"), len(values))
        for q, per_mille in THREE:
            if values:
                v.close(SECTION, key, f"{name}.{q}", got.get(q), nearest_rank(values, per_mille) / NS_PER_MS,
                        NS_UNIT_MS)  # fmt: skip
            else:
                v.exact(SECTION, key, f"{name}.{q}", got.get(q), None)
    items = sum(r.get("n_items") or 0 for r in ok)
    tokens = sum(r.get("n_in") or 0 for r in ok)
    v.exact(SECTION, key, "items", report["items"], items)
    v.exact(SECTION, key, "input_tokens", report["input_tokens"], tokens)
    _batches(v, key, report.get("batch_size"), [r["n_items"] for r in lines if r.get("n_items") is not None])
    if seconds is None:
        return
    v.close(SECTION, key, "window_s", report.get("window_s"), seconds, 1e-9 + slack_s, False)
    for name, n in (("requests_per_s", len(lines)), ("ok_per_s", len(ok)), ("input_tokens_per_s", tokens)):
        slack = n / max(seconds - slack_s, 1e-9) - n / seconds if slack_s else 0.0
        v.close(SECTION, key, name, report.get(name), n / seconds, slack, False)
    if report.get("items_per_s") is not None:
        slack = items / max(seconds - slack_s, 1e-9) - items / seconds if slack_s else 0.0
        v.close(SECTION, key, "items_per_s", report["items_per_s"], items / seconds, slack, False)


def _batches(v: Verdict, key: str, report: dict[str, Any] | None, sizes: list[int]) -> None:
    """Batch sizes are exact: every size's count, the mean, nearest-rank percentiles, max."""
    if not sizes:
        v.exact(SECTION, key, "batch_size", report, None)
        return
    report = report or {}
    sizes.sort()
    counts: dict[str, int] = {}
    for s in sizes:
        counts[str(s)] = counts.get(str(s), 0) + 1
    v.exact(SECTION, key, "batch_size.distribution", report.get("distribution"), counts)
    v.close(SECTION, key, "batch_size.mean", report.get("mean"), sum(sizes) / len(sizes), 0.0, False)
    for q, per_mille in THREE:
        v.exact(SECTION, key, f"batch_size.{q}", report.get(q), sizes[rank(per_mille, len(sizes)) - 1])
    v.exact(SECTION, key, "batch_size.max", report.get("max"), sizes[-1])
