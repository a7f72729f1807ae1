"""The per-request metric formulas of docs/metrics.md ("Metric definitions"), once, in integer nanoseconds.

Every figure loadkit shows of one request comes from here. ``RequestMetrics.of`` applies every
formula to a finished record once (the stats collector does it as the record arrives,
``RequestRecord.measure``); the stats histograms (engine, label, stage, tenant, user class,
turn, length bucket) record its integers, and the raw log's and the API's milliseconds
(``loadkit.records``' ``*_ms``) are those divided by 10^6, so a view cannot disagree with
another by a rounding, and no view walks a request's events again. A metric that was not
measured is None, never 0. This module depends on nothing of loadkit's (records and stats both
import it); ``loadkit.verify`` does not import it: it is the second, independent implementation.
"""

from __future__ import annotations

from operator import sub
from typing import Any, NamedTuple

# Duck-typed: a RequestRecord (loadkit.records) or anything with its fields.
Record = Any


def div_round(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded half up, in integers (no float error at any size)."""
    return (2 * numerator + denominator) // (2 * denominator)


def ttft_ns(r: Record) -> int | None:
    """TTFT = t_first − t_send: the first token-bearing event of any channel (reasoning too)."""
    events = r.event_t_ns
    return events[0] - r.t_send_ns if events else None


def ttft_sched_ns(r: Record) -> int | None:
    """TTFT from schedule = t_first − t_sched (t_send when unscheduled); free of coordinated omission."""
    events = r.event_t_ns
    if not events:
        return None
    return events[0] - (r.t_sched_ns if r.t_sched_ns is not None else r.t_send_ns)


def ttft_with_connect_ns(r: Record) -> int | None:
    """TTFT with connection set-up = t_first − t_start."""
    events = r.event_t_ns
    return events[0] - (r.t_start_ns or r.t_send_ns) if events else None


def tpot_ns(r: Record) -> int | None:
    """TPOT = (t_last − t_first) / (n_out − 1), rounded to the ns; only when n_out ≥ 2."""
    events, n_out = r.event_t_ns, r.n_out
    if not events or n_out is None or n_out < 2:
        return None
    return div_round(events[-1] - events[0], n_out - 1)


def e2e_ns(r: Record) -> int | None:
    """E2E = t_end − t_send."""
    return None if r.t_end_ns is None else r.t_end_ns - r.t_send_ns


def connect_ns(r: Record) -> int | None:
    """TCP connect time of the connection this request opened; None when it reused one."""
    if r.t_connect_ns is None or r.t_connected_ns is None:
        return None
    return r.t_connected_ns - r.t_connect_ns


def tls_ns(r: Record) -> int | None:
    """TLS handshake time of the connection this request opened; None on reuse or plain HTTP."""
    if r.t_tls_ns is None or r.t_connected_ns is None:
        return None
    return r.t_tls_ns - r.t_connected_ns


def send_ns(r: Record) -> int | None:
    """Send time = t_sent − t_send: write start to the last byte handed to the kernel (the upload,
    part of TTFT for a large image request); None when the request was never written. At least 0:
    t_sent may be clamped to the answer's kernel stamp (loadkit/client/timer.py)."""
    sent = getattr(r, "t_sent_ns", None)  # duck-typed records may not carry it
    if sent is None or not r.t_send_ns:
        return None
    return max(sent - r.t_send_ns, 0)


def ttfrt_ns(r: Record) -> int | None:
    """Time to first reasoning token = t_first_reasoning − t_send."""
    return None if r.t_first_reasoning_ns is None else r.t_first_reasoning_ns - r.t_send_ns


def ttfat_ns(r: Record) -> int | None:
    """Time to first answer token = t_first_answer − t_send: what the user waits for."""
    return None if r.t_first_answer_ns is None else r.t_first_answer_ns - r.t_send_ns


def ttftc_ns(r: Record) -> int | None:
    """Time to first tool-call token = t_first_tool − t_send."""
    return None if r.t_first_tool_ns is None else r.t_first_tool_ns - r.t_send_ns


def reasoning_ns(r: Record) -> int | None:
    """Reasoning duration = t_reasoning_end − t_first_reasoning (the thinking phase as seen)."""
    if r.t_first_reasoning_ns is None or r.t_reasoning_end_ns is None:
        return None
    return r.t_reasoning_end_ns - r.t_first_reasoning_ns


def answer_tpot_ns(r: Record) -> int | None:
    """Answer TPOT = (t_last_answer − t_first_answer) / (n_answer − 1); only when n_answer ≥ 2."""
    first, last, n = r.t_first_answer_ns, r.t_last_answer_ns, r.n_answer
    if first is None or last is None or n is None or n < 2:
        return None
    return div_round(last - first, n - 1)


def max_gap_ns(events: list[int]) -> int:
    """The largest gap between consecutive stream events (≥ 2 events); a C-level loop."""
    return max(map(sub, events[1:], events))


def itl_chunk_ns(events: list[int]) -> list[int]:
    """ITL per chunk: t_i − t_{i−1} between consecutive token-bearing events."""
    return list(map(sub, events[1:], events))


def itl_token_ns(events: list[int], tokens: list[int]) -> list[tuple[int, int]]:
    """ITL per token: (t_i − t_{i−1}) / k_i rounded to the ns, as (value, weight k_i).

    Without a token count for every event, one token per event (weight 1)."""
    gaps = itl_chunk_ns(events)
    weighted = itl_token_weighted(gaps, tokens)
    if weighted is None:
        return [(gap, 1) for gap in gaps]
    return list(zip(*weighted, strict=True))


def itl_token_weighted(gaps: list[int], tokens: list[int]) -> tuple[list[int], list[int]] | None:
    """ITL per token from the chunk gaps, as (values, weights): gap_i / k_i rounded to the ns,
    weight k_i (a k ≤ 1 counts as one token). None when it equals the gaps with weight 1 (token
    counts missing, or one token per event), so the stats' common case records the gaps as they are."""
    ks = tokens[1 : len(gaps) + 1]
    if len(ks) < len(gaps) or not ks or max(ks) <= 1:
        return None
    values, weights = [], []
    for gap, k in zip(gaps, ks, strict=True):
        if k > 1:
            values.append(div_round(gap, k))
            weights.append(k)
        else:
            values.append(gap)
            weights.append(1)
    return values, weights


def latency_per_item_ns(r: Record, e2e: int | None) -> int | None:
    """Latency per item = E2E / n_items, rounded to the ns: a batched kind's cost of one input
    or document; None without a latency or for a request of fewer than two items."""
    items = getattr(r, "n_items", None)  # duck-typed records may not carry it
    if e2e is None or items is None or items < 2:
        return None
    return div_round(e2e, items)


def unstreamed(r: Record) -> bool:
    """A request answered in one body (embeddings, rerank, a plugin's body kind): not chat and
    no token event. Its latency is its E2E, kept out of the streamed figures (E2E, TTFT, TPOT)
    and shown in its kind's rows (docs/metrics.md "Request kinds")."""
    return not r.event_t_ns and getattr(r, "kind", "chat") != "chat"


class RequestMetrics(NamedTuple):
    """Every metric of one finished request, in integer ns (None: not measured), computed once
    by ``of``. ``slo_values`` are the SLO keys' values in ``loadkit.stats.metrics.SLO_KEYS``
    order (a test holds the two orders equal); the stats judge a request on them."""

    ttft_ns: int | None
    ttft_sched_ns: int | None
    ttft_with_connect_ns: int | None
    tpot_ns: int | None
    e2e_ns: int | None
    connect_ns: int | None
    tls_ns: int | None
    ttfrt_ns: int | None
    ttfat_ns: int | None
    ttftc_ns: int | None
    reasoning_ns: int | None
    answer_tpot_ns: int | None
    send_ns: int | None
    # A batched kind's latency per item (E2E / n_items, embeddings and rerank); None for one item or none.
    latency_per_item_ns: int | None
    # ITL per chunk (t_i − t_{i−1}); empty below two events. itl_max_ns: the largest of them,
    # what an ``itl_ms`` SLO is judged on.
    itl_gaps_ns: list[int]
    itl_max_ns: int | None
    slo_values: tuple[int | None, ...]

    @classmethod
    def of(cls, r: Record) -> RequestMetrics:
        """Apply every formula above to ``r`` (the only walk over its events: one C-level pass)."""
        events = r.event_t_ns
        gaps = itl_chunk_ns(events) if len(events) > 1 else []
        worst = max(gaps) if gaps else None
        ttft, sched, tpot, e2e = ttft_ns(r), ttft_sched_ns(r), tpot_ns(r), e2e_ns(r)
        ttfat, answer_tpot = ttfat_ns(r), answer_tpot_ns(r)
        per_item = latency_per_item_ns(r, e2e)
        # SLO slots by kind (docs/metrics.md "How an SLO is judged"): a streamed request is judged
        # on e2e_ms and never on latency_ms; a request answered in one body (a non-chat kind, no
        # token events) on latency_ms / latency_per_item_ms, never on e2e_ms: a chat E2E limit
        # does not judge an embedding, nor an embedding's limit a chat.
        if unstreamed(r):
            slo_e2e, latency, per_item_slo = None, e2e, per_item
        else:
            slo_e2e, latency, per_item_slo = e2e, None, None
        # tuple.__new__ with the fields in order: the generated keyword __new__ costs twice as much,
        # and this runs once per request on the load-generating process.
        return tuple.__new__(cls, (ttft, sched, ttft_with_connect_ns(r), tpot, e2e, connect_ns(r), tls_ns(r),
                                   ttfrt_ns(r), ttfat, ttftc_ns(r), reasoning_ns(r), answer_tpot, send_ns(r), per_item, gaps, worst,
                                   (ttft, sched, tpot, slo_e2e, worst, ttfat, answer_tpot, latency, per_item_slo)))  # fmt: skip
