"""Per-request figures from a raw-log line, and nearest-rank percentiles, written from the
definitions in docs/metrics.md (not from loadkit.stats: this is the second implementation).

Times are kept in integer nanoseconds, the raw log's clock (``t_*_ns``); a figure is ``None``
when it was not measured, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NS_PER_MS = 1_000_000
# Percentiles the report quotes, as (key, per-mille): integer arithmetic for the rank.
QUANTILES = (("p50", 500), ("p90", 900), ("p95", 950), ("p99", 990), ("p999", 999))
# The report's histograms bound a quoted value's relative error by 2^-10 (docs/metrics.md:
# "log-linear histograms", 9 sub-bucket bits); a manifest may state its own.
DEFAULT_RELATIVE_ERROR = 1.0 / 1024


def rank(per_mille: int, count: int) -> int:
    """Nearest rank (1-based) of quantile per_mille/1000 among ``count`` values: ceil(q·count)."""
    return max(1, -(-per_mille * count // 1000))


def nearest_rank(ordered: Sequence[float], per_mille: int) -> float:
    """The nearest-rank percentile of already sorted values."""
    return ordered[rank(per_mille, len(ordered)) - 1]


def weighted_nearest_rank(ordered: Sequence[tuple[float, int]], per_mille: int) -> float:
    """Nearest rank over (value, weight) pairs sorted by value: each value counted weight times."""
    wanted = rank(per_mille, sum(w for _, w in ordered))
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= wanted:
            return value
    return ordered[-1][0]


def request_times_ns(r: dict[str, Any]) -> dict[str, float | None]:
    """An ok request's latencies in ns (docs/metrics.md, "Metric definitions")."""
    send, first, last, end = r["t_send_ns"], r["t_first_ns"], r["t_last_ns"], r["t_end_ns"]
    start = r.get("t_start_ns") or send
    sched = r.get("t_sched_ns")
    n_out = r["n_out"]
    out: dict[str, float | None] = {"ttft_ms": None, "ttft_sched_ms": None, "ttft_with_connect_ms": None,
                                    "tpot_ms": None, "e2e_ms": None if end is None else end - send}  # fmt: skip
    if is_unstreamed(r):  # its latency is its kind's row, not the streamed E2E (docs/metrics.md)
        out["e2e_ms"] = None
    if first is not None:
        out["ttft_ms"] = first - send
        out["ttft_sched_ms"] = first - (sched if sched is not None else send)
        out["ttft_with_connect_ms"] = first - start
        if last is not None and n_out is not None and n_out >= 2:
            # In whole ns, rounded half up: the report's histograms hold integers.
            out["tpot_ms"] = (2 * (last - first) + n_out - 1) // (2 * (n_out - 1))
    for name, field in (("ttfat_ms", "t_first_answer_ns"), ("ttfrt_ms", "t_first_reasoning_ns"),
                        ("ttftc_ms", "t_first_tool_ns")):  # fmt: skip
        t = r.get(field)
        out[name] = None if t is None else t - send
    return out


def gaps_ns(r: dict[str, Any]) -> list[int]:
    """Gaps between consecutive token events (needs ``--raw-log-events``)."""
    t = r.get("event_t_ns") or []
    return [b - a for a, b in zip(t, t[1:], strict=False)]


def itl_token_pairs(r: dict[str, Any]) -> list[tuple[float, int]]:
    """ITL per token: each gap divided by the tokens of the event it ends, weighted by them.
    A stream whose events all carry one token (or whose counts are missing) weighs each gap 1."""
    gaps = gaps_ns(r)
    ks = (r.get("event_tokens") or [])[1 : len(gaps) + 1]
    if len(ks) < len(gaps) or not ks or max(ks) <= 1:
        return [(g, 1) for g in gaps]
    return [(g / max(k, 1), max(k, 1)) for g, k in zip(gaps, ks, strict=True)]


def slo_value_ns(r: dict[str, Any], key: str, times: dict[str, float | None]) -> float | None | str:
    """The value an SLO on ``key`` judges for an ok request; ``"unknown"`` when the raw log
    lacks what it takes (ITL without events, answer TPOT in a log without t_last_answer_ns)."""
    if key == "itl_ms":
        if "event_t_ns" not in r:
            return "unknown"
        gaps = gaps_ns(r)
        return max(gaps) if gaps else None
    if key == "answer_tpot_ms":
        return answer_tpot_ns(r)
    # By kind (docs/metrics.md "How an SLO is judged"): a request answered in one body (a
    # non-chat kind without a first token) is judged on latency_ms / latency_per_item_ms and
    # never on e2e_ms; a streamed one the other way round.
    unstreamed = is_unstreamed(r)
    if key == "e2e_ms" and unstreamed:
        return None
    if key == "latency_ms":
        end = r["t_end_ns"]
        return None if not unstreamed or end is None else end - r["t_send_ns"]
    if key == "latency_per_item_ms":
        return latency_per_item_ns(r) if unstreamed else None
    return times.get(key)


def is_unstreamed(r: dict[str, Any]) -> bool:
    """A line of a kind answered in one body: not chat, and no token event (no first token)."""
    return r.get("kind", "chat") != "chat" and r.get("t_first_ns") is None


def latency_per_item_ns(r: dict[str, Any]) -> int | None:
    """E2E / n_items rounded half up to the ns, for two items or more (docs/metrics.md)."""
    send, end, n = r["t_send_ns"], r["t_end_ns"], r.get("n_items")
    if end is None or n is None or n < 2:
        return None
    return (2 * (end - send) + n) // (2 * n)


def answer_tpot_ns(r: dict[str, Any]) -> int | None | str:
    """(t_last_answer − t_first_answer) / (n_answer − 1), rounded half up to the ns, when
    n_answer ≥ 2; ``"unknown"`` for a line from before t_last_answer_ns was logged."""
    first, n = r.get("t_first_answer_ns"), r.get("n_answer")
    if first is None:
        return None
    if "t_last_answer_ns" not in r:
        return "unknown"
    last = r["t_last_answer_ns"]
    if last is None or n is None or n < 2:
        return None
    return (2 * (last - first) + (n - 1)) // (2 * (n - 1))
