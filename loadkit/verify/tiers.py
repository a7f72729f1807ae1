"""The ``slo_tiers`` and ``cost`` sections recomputed: each tier judged on every raw-log line
(its own code, not the stats'), counted for the whole run and per stage, the highest stage
meeting the attainment target found again, and the cost figures recomputed from the
throughput the report states (which the engines and stages checks hold to the raw log)."""

from __future__ import annotations

from typing import Any

from loadkit.verify.compare import Verdict
from loadkit.verify.figures import NS_PER_MS, request_times_ns, slo_value_ns
from loadkit.verify.rawlog import Run

SECTION = "slo_tiers"


def verdict(r: dict[str, Any], limits_ns: dict[str, int]) -> bool | None:
    """docs/metrics.md "How an SLO is judged": cancelled not judged, other failures bad, an ok
    request good unless a measured value exceeds its limit; "unknown" raises (not judgeable)."""
    if r["outcome"] == "cancelled":
        return None
    if r["outcome"] != "ok":
        return False
    times = request_times_ns(r)
    for key, limit in limits_ns.items():
        value = slo_value_ns(r, key, times)
        if value == "unknown":
            raise LookupError(key)
        if value is not None and value > limit:  # type: ignore[operator]
            return False
    return True


def _count(rows: list[dict[str, Any]], limits_ns: dict[str, int]) -> tuple[int, int, int]:
    judged = good = tokens = 0
    for r in rows:
        v = verdict(r, limits_ns)
        if v is None:
            continue
        judged += 1
        if v:
            good += 1
            tokens += r["n_out"] or 0
    return judged, good, tokens


def slo_tiers(run: Run, v: Verdict) -> None:
    section = run.report.get(SECTION) or {}
    target = section.get("attainment_target")
    for engine, entry in sorted((section.get("by_target") or {}).items()):
        mine = [r for r in run.rows if r["engine"] == engine]
        stage_rows = {
            s.get("name"): s for s in ((run.report.get("stages") or {}).get(engine) or {}).get("stages") or []
        }
        for tier in entry.get("tiers") or []:
            limits = {k: round(float(ms) * NS_PER_MS) for k, ms in (tier.get("slos") or {}).items()}
            key = f"{engine} / tier {tier.get('name')}"
            try:
                judged, good, tokens = _count(mine, limits)
            except LookupError as exc:
                v.notes.append(f"{key}: the raw log lacks what SLO key {exc} judges")
                continue
            whole = tier.get("whole_run") or {}
            for name, value in (("judged", judged), ("good", good), ("good_output_tokens", tokens)):
                v.exact(SECTION, key, name, whole.get(name), value)
            best = None
            for row in tier.get("stages") or []:
                rows = [r for r in mine if r.get("stage") == row.get("stage")]
                j, g, t = _count(rows, limits)
                skey = f"{key} / stage {row.get('stage')}"
                for name, value in (("judged", j), ("good", g), ("good_output_tokens", t)):
                    v.exact(SECTION, skey, name, row.get(name), value)
                stage_row = stage_rows.get(row.get("stage")) or {}
                v.exact(SECTION, skey, "output_tokens_per_s", row.get("output_tokens_per_s"),
                        (stage_row.get("stats") or {}).get("output_tokens_per_s"))  # fmt: skip
                if j and isinstance(target, int | float) and g / j >= target:
                    best = row.get("stage")
            reported = (tier.get("max_load") or {}).get("stage")
            v.exact(SECTION, key, "max_load.stage", reported, best)
    cost(run, v)


def _per_million(hourly: float, per_s: Any) -> float | None:
    return hourly * 1e6 / (per_s * 3600.0) if isinstance(per_s, int | float) and per_s > 0 else None


def _check(v: Verdict, key: str, figure: str, report: Any, recomputed: float | None) -> None:
    if recomputed is None:
        v.exact("cost", key, figure, report, None)
    else:
        v.close("cost", key, figure, report, recomputed, 0, False)


def cost(run: Run, v: Verdict) -> None:
    """Each cost figure from the price and the throughput the report states beside it."""
    engines = run.report.get("engines") or {}
    tiers = (run.report.get(SECTION) or {}).get("by_target") or {}
    for engine, entry in sorted((run.report.get("cost") or {}).items()):
        hourly = float(entry["gpu_hour_cost"]) * int(entry["gpus"])
        _check(v, engine, "cost_per_hour", entry.get("cost_per_hour"), hourly)
        section = engines.get(engine) or {}
        measured = entry.get("measured") or {}
        v.exact("cost", engine, "measured.output_tokens_per_s", measured.get("output_tokens_per_s"),
                section.get("output_tokens_per_s"))  # fmt: skip
        v.exact(
            "cost", engine, "measured.requests_per_s", measured.get("requests_per_s"), section.get("ok_per_s")
        )
        _check(v, engine, "measured.cost_per_1m_output_tokens", measured.get("cost_per_1m_output_tokens"),
               _per_million(hourly, section.get("output_tokens_per_s")))  # fmt: skip
        _check(v, engine, "measured.cost_per_1m_requests", measured.get("cost_per_1m_requests"),
               _per_million(hourly, section.get("ok_per_s")))  # fmt: skip
        stage_rows = {
            r.get("name"): r for r in ((run.report.get("stages") or {}).get(engine) or {}).get("stages") or []
        }
        for row in entry.get("stages") or []:
            stats = (stage_rows.get(row.get("stage")) or {}).get("stats") or {}
            key = f"{engine} / stage {row.get('stage')}"
            _check(v, key, "cost_per_1m_output_tokens", row.get("cost_per_1m_output_tokens"),
                   _per_million(hourly, stats.get("output_tokens_per_s")))  # fmt: skip
            _check(v, key, "cost_per_1m_requests", row.get("cost_per_1m_requests"),
                   _per_million(hourly, stats.get("requests_per_s")))  # fmt: skip
        by_name = {t.get("name"): t for t in (tiers.get(engine) or {}).get("tiers") or []}
        for name, figures in sorted((entry.get("tiers") or {}).items()):
            tier = by_name.get(name) or {}
            key = f"{engine} / tier {name}"
            good_rate = (tier.get("whole_run") or {}).get("good_output_tokens_per_s")
            _check(v, key, "cost_per_1m_good_output_tokens", figures.get("cost_per_1m_good_output_tokens"),
                   _per_million(hourly, good_rate))  # fmt: skip
            top, at = tier.get("max_load"), figures.get("max_load")
            v.exact("cost", key, "max_load.stage", (at or {}).get("stage"), (top or {}).get("stage"))
            if top and at:
                _check(v, key, "max_load.cost_per_1m_output_tokens", at.get("cost_per_1m_output_tokens"),
                       _per_million(hourly, top.get("output_tokens_per_s")))  # fmt: skip
                _check(v, key, "max_load.cost_per_1m_requests", at.get("cost_per_1m_requests"),
                       _per_million(hourly, top.get("requests_per_s")))  # fmt: skip
