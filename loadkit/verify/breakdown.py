"""``server_breakdown`` of an engine or label recomputed from the raw log: each ok line's own
``server_breakdown`` (the engine's timings, normalised and joined with the client's TTFT) is
counted and its stage times summarised (docs/reports.md, "Server-side breakdown"): requests
reported and not, sources, negative residuals (recorded as 0), per stage count, mean, p50, p90,
p99."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import NS_UNIT_MS, Verdict
from loadkit.verify.figures import nearest_rank

STAGES = ("queue_ms", "load_ms", "prefill_ms", "decode_ms", "decode_per_token_ms", "residual_ttft_ms",
          "server_total_ms")  # fmt: skip
THREE = (("p50", 500), ("p90", 900), ("p99", 990))


def compare_breakdown(v: Verdict, section: str, key: str, report: dict[str, Any] | None,
                      rows: list[dict[str, Any]]) -> None:  # fmt: skip
    if not isinstance(report, dict):
        return
    ok = [r for r in rows if r["outcome"] == "ok"]
    joined = [r["server_breakdown"] for r in ok if isinstance(r.get("server_breakdown"), dict)]
    if any("server_breakdown" not in r for r in ok):
        v.notes.append(
            f"{section} {key} server_breakdown because the raw log's lines lack the field (written before it was logged)"
        )
        return
    fig = "server_breakdown"
    v.exact(section, key, f"{fig}.requests_reported", report.get("requests_reported"), len(joined))
    v.exact(
        section,
        key,
        f"{fig}.requests_not_reported",
        report.get("requests_not_reported"),
        len(ok) - len(joined),
    )
    sources: dict[str, int] = {}
    negative = 0
    values: dict[str, list[float]] = {name: [] for name in STAGES}
    for b in joined:
        sources[str(b.get("source"))] = sources.get(str(b.get("source")), 0) + 1
        for name in STAGES:
            x = b.get(name)
            if x is None:
                continue
            if x < 0:
                negative += 1
                x = 0.0
            values[name].append(round(x * 1e6) / 1e6)  # the report records whole ns
    v.exact(section, key, f"{fig}.sources", report.get("sources"), sources)
    v.exact(section, key, f"{fig}.negative_residuals", report.get("negative_residuals"), negative)
    stages = report.get("stages")
    if not joined:
        v.exact(section, key, f"{fig}.stages", stages, None)
        return
    for name in STAGES:
        got = (stages or {}).get(name)
        mine = sorted(values[name])
        if not mine:
            v.exact(section, key, f"{fig}.{name}", got, None)
            continue
        if got is None:
            v.exact(section, key, f"{fig}.{name}", "missing", "present")
            continue
        v.exact(section, key, f"{fig}.{name}.count", got.get("count"), len(mine))
        v.close(section, key, f"{fig}.{name}.mean", got.get("mean"), sum(mine) / len(mine), NS_UNIT_MS, False)
        for q, per_mille in THREE:
            v.close(section, key, f"{fig}.{name}.{q}", got.get(q), nearest_rank(mine, per_mille), NS_UNIT_MS)
