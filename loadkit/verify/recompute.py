"""Recompute a group's figures (counts, token totals, distributions, SLO verdicts) from its
raw-log lines, as docs/metrics.md defines them: latencies over ``ok`` requests only, every
request in exactly one outcome, ``failures`` = every outcome but ``ok`` and ``cancelled``, a
``cancelled`` request not judged against the SLOs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadkit.verify.figures import NS_PER_MS, gaps_ns, itl_token_pairs, request_times_ns, slo_value_ns

LATENCIES = ("ttft_ms", "ttft_sched_ms", "ttft_with_connect_ms", "tpot_ms", "e2e_ms", "ttfat_ms", "ttfrt_ms",
             "ttftc_ms")  # fmt: skip
# Figures whose raw times are not all in the log (the reasoning's end, the last answer token):
# taken from the line's own value in ms, put back on the whole-ns grid the report records.
FROM_LOG_MS = ("reasoning_ms", "answer_tpot_ms")
CHANNEL_TOKENS = ("n_reasoning", "n_answer", "n_tool")


@dataclass
class Figures:
    """What the raw log says about one group of requests (values in ms and tokens)."""

    counts: dict[str, Any]
    values: dict[str, list[float]]  # metric -> sorted values
    weighted: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # itl_ms
    slo: dict[str, Any] | None = None  # None: no SLOs; else good, judged, attainment counts
    slo_unknown: list[str] = field(default_factory=list)  # SLO keys the raw log cannot judge


def figures(rows: list[dict[str, Any]], slos: dict[str, float], with_itl: bool) -> Figures:
    counts: dict[str, Any] = {"requests": len(rows), "ok": 0, "cancelled": 0, "outcomes": {},
                              "output_tokens": 0, "output_tokens_all_outcomes": 0, "input_tokens": 0,
                              "cached_tokens": 0, "stream_ends": {}, "n_out_sources": {}}  # fmt: skip
    values: dict[str, list[float]] = {m: [] for m in (*LATENCIES, *FROM_LOG_MS, *CHANNEL_TOKENS, "connect_ms",
                                                      "tls_ms", "n_in", "n_out", "n_cached")}  # fmt: skip
    chunk: list[float] = []
    per_token: list[tuple[float, int]] = []
    limits = {k: round(float(v) * NS_PER_MS) for k, v in slos.items()}
    tally = {k: [0, 0, 0] for k in limits}  # met, violated, not measured
    good = judged = 0
    unknown: set[str] = set()
    for r in rows:
        outcome = r["outcome"]
        _bump(counts["outcomes"], outcome)
        if r["n_in"] is not None:
            counts["input_tokens"] += r["n_in"]
            values["n_in"].append(r["n_in"])
        if r.get("cached_tokens") is not None:
            counts["cached_tokens"] += r["cached_tokens"]
            values["n_cached"].append(r["cached_tokens"])
        if r["n_out"] is not None:
            counts["output_tokens_all_outcomes"] += r["n_out"]
        if r.get("n_out_source") is not None:
            _bump(counts["n_out_sources"], r["n_out_source"])
        for name in ("connect_ms", "tls_ms"):  # any outcome: the connection's, not the request's
            if r.get(name) is not None:
                values[name].append(_whole_ns(r[name]))
        if outcome == "cancelled":
            counts["cancelled"] += 1
            continue
        judged += 1
        if outcome != "ok":
            continue
        counts["ok"] += 1
        counts["output_tokens"] += r["n_out"] or 0
        if r.get("end") is not None:
            _bump(counts["stream_ends"], r["end"])
        if r["n_out"] is not None:
            values["n_out"].append(r["n_out"])
        for name in CHANNEL_TOKENS:
            if r.get(name) is not None:
                values[name].append(r[name])
        for name in FROM_LOG_MS:
            if r.get(name) is not None:
                values[name].append(_whole_ns(r[name]))
        times = request_times_ns(r)
        for name in LATENCIES:
            if times[name] is not None:
                values[name].append(times[name] / NS_PER_MS)  # type: ignore[operator]
        if with_itl:
            chunk += [g / NS_PER_MS for g in gaps_ns(r)]
            per_token += [(v / NS_PER_MS, w) for v, w in itl_token_pairs(r)]
        verdict = True
        for key, limit in limits.items():
            value = slo_value_ns(r, key, times)
            if value == "unknown":
                unknown.add(key)
                continue
            slot = 2 if value is None else 0 if value <= limit else 1  # type: ignore[operator]
            tally[key][slot] += 1
            verdict = verdict and slot != 1
        good += verdict
    counts["failures"] = counts["requests"] - counts["ok"] - counts["cancelled"]
    out = Figures(counts, {k: sorted(v) for k, v in values.items()})
    if with_itl:
        out.values["itl_chunk_ms"] = sorted(chunk)
        out.weighted["itl_ms"] = sorted(per_token)
    if limits:
        out.slo = {"good": good, "judged": judged, "attainment": tally}
        out.slo_unknown = sorted(unknown)
    return out


def _whole_ns(ms: float) -> float:
    return round(ms * NS_PER_MS) / NS_PER_MS


def _bump(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def group_by(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out
