"""RequestRecord: everything measured about one request, and the metrics of docs/metrics.md ("Metric definitions").

All timestamps are `time.perf_counter_ns()` values (CLOCK_MONOTONIC on Linux, the clock the
simulator's truth log uses too). A metric that was not measured is None, never 0. The metrics
are computed once per finished record (``RequestRecord.measure``, loadkit.formulas'
``RequestMetrics``); the ``*_ms`` functions here are views over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadkit.core.servertimings import join
from loadkit.formulas import RequestMetrics, itl_token_weighted
from loadkit.types import OK

NS_PER_MS = 1_000_000


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    engine: str  # the target's name (two targets may share one adapter)
    adapter: str
    label: str = "default"
    outcome: str = OK
    error: str | None = None
    http_status: int | None = None
    t_sched_ns: int | None = None
    # When loadkit began the request: before taking a kept-alive connection or opening one.
    t_start_ns: int = 0
    # When the request's bytes were written, connection set-up done (a request never written:
    # when its attempt started).
    t_send_ns: int = 0
    # Connection set-up, when this request opened a connection (None: it reused one): TCP
    # connect began, TCP connected, TLS handshake done.
    t_connect_ns: int | None = None
    t_connected_ns: int | None = None
    t_tls_ns: int | None = None
    t_headers_ns: int | None = None
    # When the request's last byte was handed to the kernel (sendall returned): t_sent − t_send
    # is the upload, part of TTFT for a multi-megabyte body (images). None: never written.
    t_sent_ns: int | None = None
    request_bytes: int | None = None  # the request as written: head and body
    t_end_ns: int | None = None
    # Arrival time and token count of every token-bearing event, in order.
    event_t_ns: list[int] = field(default_factory=list)
    event_tokens: list[int] = field(default_factory=list)
    n_in: int | None = None
    n_in_target: int | None = None
    n_out: int | None = None
    n_out_source: str | None = None  # "usage" | "tokenizer" | "events"
    cached_tokens: int | None = None
    expected_cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    # Of max_tokens, the tokens the workload expected to be reasoning (ServeGen's reason_ratio).
    expected_reasoning_tokens: int | None = None
    max_tokens: int | None = None
    finish_reason: str | None = None
    # How an ok stream ended: "marker" (the protocol's end, e.g. [DONE]) or "close" (a clean
    # close after the engine's last message); None for every other outcome.
    end: str | None = None
    session_id: str | None = None
    turn: int | None = None
    stage: str | None = None
    worker: int | None = None
    user_class: str | None = None  # the Locust user class that sent it
    # Reads that held more than one event: their earlier events carry the newest arrival time.
    coalesced_reads: int = 0
    server_timings: dict[str, Any] | None = None
    # Seconds the server asked the client to wait (Retry-After on 429/503), when it said.
    retry_after_s: float | None = None
    # Output channels (loadkit.core.channels), for parsers that tell them apart; None where
    # the reply had no such channel (no reasoning: no first reasoning time) or the parser cannot.
    t_first_reasoning_ns: int | None = None
    t_last_reasoning_ns: int | None = None
    t_reasoning_end_ns: int | None = None  # first answer/tool event after reasoning began
    t_first_answer_ns: int | None = None
    t_last_answer_ns: int | None = None
    t_first_tool_ns: int | None = None
    n_reasoning: int | None = None
    n_reasoning_source: str | None = None  # "usage" | "events"
    n_answer: int | None = None
    n_answer_source: str | None = None
    n_tool: int | None = None  # tool-call tokens, counted from events
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "name", "arguments"}] as streamed
    text: str = ""
    # An adapter_error's traceback, on the first of its kind in a process only
    # (client/adaptererr.py); the report's adapter_errors keeps it, the raw log does not.
    traceback: str | None = None
    # Images in the request (workload/images.py): count, pixels in all, image tokens expected
    # (loadkit/imagetokens.py) and as the server reported them (None: it did not say).
    image_count: int = 0
    image_pixels: int = 0
    image_tokens_expected: int | None = None
    image_tokens: int | None = None
    # The request's kind (loadkit.core.kinds) and, for batched kinds, its items as sent (inputs
    # embedded, documents ranked) and as answered (None: not answered or not counted).
    kind: str = "chat"
    n_items: int | None = None
    n_items_returned: int | None = None
    # This request's metrics, set once it is finished (``measure``); None before.
    metrics: RequestMetrics | None = field(default=None, repr=False, compare=False)

    def measure(self) -> RequestMetrics:
        """Compute this finished request's metrics (every formula, once) and keep them: the stats
        collector calls it as the record arrives; every view, the raw-log line and the ``*_ms``
        functions then read ``metrics`` instead of computing again."""
        self.metrics = RequestMetrics.of(self)
        return self.metrics

    @property
    def ok(self) -> bool:
        """The request ended normally (outcome ``ok``)."""
        return self.outcome == OK

    @property
    def t_first_ns(self) -> int | None:
        return self.event_t_ns[0] if self.event_t_ns else None

    @property
    def t_last_ns(self) -> int | None:
        return self.event_t_ns[-1] if self.event_t_ns else None

    def to_json(self) -> dict[str, Any]:
        """The raw-log line for this request (docs/metrics.md's names); text and event arrays left out."""
        m = metrics_of(self)
        return {
            "request_id": self.request_id,
            "engine": self.engine,
            "adapter": self.adapter,
            "label": self.label,
            "outcome": self.outcome,
            "error": self.error,
            "http_status": self.http_status,
            "ttft_ms": _to_ms(m.ttft_ns),
            "ttft_sched_ms": _to_ms(m.ttft_sched_ns),
            "ttft_with_connect_ms": _to_ms(m.ttft_with_connect_ns),
            "tpot_ms": _to_ms(m.tpot_ns),
            "e2e_ms": _to_ms(m.e2e_ns),
            "new_connection": self.t_connect_ns is not None,
            "connect_ms": _to_ms(m.connect_ns),
            "tls_ms": _to_ms(m.tls_ns),
            "n_in": self.n_in,
            "n_in_target": self.n_in_target,
            "n_out": self.n_out,
            "n_out_source": self.n_out_source,
            # The output length asked of the server (the lengths section's output_asked).
            "max_tokens": self.max_tokens,
            "cached_tokens": self.cached_tokens,
            "expected_cached_tokens": self.expected_cached_tokens,
            "n_events": len(self.event_t_ns),
            "coalesced_reads": self.coalesced_reads,
            "t_sched_ns": self.t_sched_ns,
            "t_start_ns": self.t_start_ns or self.t_send_ns,
            "t_send_ns": self.t_send_ns,
            "t_first_ns": self.t_first_ns,
            "t_last_ns": self.t_last_ns,
            "t_end_ns": self.t_end_ns,
            "session_id": self.session_id,
            "turn": self.turn,
            "stage": self.stage,
            "worker": self.worker,
            "user_class": self.user_class,
            "finish_reason": self.finish_reason,
            "end": self.end,
            "retry_after_s": self.retry_after_s,
            # Engine-reported timings (llama.cpp's prompt_ms, predicted_per_token_ms...), as sent.
            "server_timings": self.server_timings,
            # The same, normalised and joined with the client's TTFT (loadkit.core.servertimings).
            "server_breakdown": server_breakdown(self, m),
            **channel_fields(self, m),
            **image_fields(self, m),
            **kind_fields(self, m),
        }


def kind_fields(r: RequestRecord, m: RequestMetrics | None = None) -> dict[str, Any]:
    """The raw-log fields of the request's kind: its items, and its latency (= E2E, every kind)
    with the latency per item where the request carried several."""
    m = m or metrics_of(r)
    return {
        "kind": getattr(r, "kind", "chat"),
        "n_items": getattr(r, "n_items", None),
        "n_items_returned": getattr(r, "n_items_returned", None),
        "latency_ms": _to_ms(m.e2e_ns),
        "latency_per_item_ms": _to_ms(m.latency_per_item_ns),
    }


def image_fields(r: RequestRecord, m: RequestMetrics | None = None) -> dict[str, Any]:
    """The raw-log fields of the request's size on the wire and its images."""
    return {
        "request_bytes": getattr(r, "request_bytes", None),
        "send_ms": _to_ms((m or metrics_of(r)).send_ns),
        "image_count": getattr(r, "image_count", 0),
        "image_pixels": getattr(r, "image_pixels", 0),
        "image_tokens_expected": getattr(r, "image_tokens_expected", None),
        "image_tokens": getattr(r, "image_tokens", None),
    }


def metrics_of(r: RequestRecord) -> RequestMetrics:
    """``r``'s metrics: those ``measure`` kept, or (a record not yet finished by the stats, e.g.
    in a plugin's hook or a test) computed now and not kept, since the record may still change."""
    # getattr: the views also take duck-typed records (anything with RequestRecord's fields).
    m = getattr(r, "metrics", None)
    return m if m is not None else RequestMetrics.of(r)


def server_breakdown(r: RequestRecord, m: RequestMetrics | None = None) -> dict[str, Any] | None:
    """The server's stage times (ms) joined with the client's TTFT; None: not reported."""
    if r.server_timings is None:
        return None
    first, last = r.t_first_ns, r.t_last_ns
    span = None if first is None or last is None else _ms(last - first)
    return join(r.server_timings, _to_ms((m or metrics_of(r)).ttft_ns), span)


def channel_fields(r: RequestRecord, m: RequestMetrics | None = None) -> dict[str, Any]:
    """The raw-log fields of the reasoning, answer and tool-call channels."""
    m = m or metrics_of(r)
    return {
        "ttfrt_ms": _to_ms(m.ttfrt_ns),
        "ttfat_ms": _to_ms(m.ttfat_ns),
        "ttftc_ms": _to_ms(m.ttftc_ns),
        "reasoning_ms": _to_ms(m.reasoning_ns),
        "answer_tpot_ms": _to_ms(m.answer_tpot_ns),
        "n_reasoning": r.n_reasoning,
        "n_reasoning_source": r.n_reasoning_source,
        "n_answer": r.n_answer,
        "n_answer_source": r.n_answer_source,
        "n_tool": r.n_tool,
        "expected_reasoning_tokens": getattr(r, "expected_reasoning_tokens", None),
        "t_first_reasoning_ns": r.t_first_reasoning_ns,
        "t_first_answer_ns": r.t_first_answer_ns,
        "t_last_answer_ns": r.t_last_answer_ns,
        "t_first_tool_ns": r.t_first_tool_ns,
        "tool_calls": r.tool_calls,
    }


def _ms(ns: int) -> float:
    return ns / NS_PER_MS


def _to_ms(ns: int | None) -> float | None:
    return None if ns is None else ns / NS_PER_MS


# The metrics in ms: views over the request's RequestMetrics (loadkit.formulas' integer ns)
# divided by 10^6, so the raw log, the API and every stats view (which records the integers)
# agree exactly.


def ttft_ms(r: RequestRecord) -> float | None:
    """TTFT = t_first − t_send, in ms (the first token of any channel, reasoning included)."""
    return _to_ms(metrics_of(r).ttft_ns)


def ttft_with_connect_ms(r: RequestRecord) -> float | None:
    """TTFT with connection set-up = t_first − t_start, in ms: what TTFT was before set-up was
    taken out (equals TTFT, within microseconds, on a reused connection)."""
    return _to_ms(metrics_of(r).ttft_with_connect_ns)


def connect_ms(r: RequestRecord) -> float | None:
    """TCP connect time of the connection this request opened; None when it reused one."""
    return _to_ms(metrics_of(r).connect_ns)


def tls_ms(r: RequestRecord) -> float | None:
    """TLS handshake time of the connection this request opened; None on reuse or plain HTTP."""
    return _to_ms(metrics_of(r).tls_ns)


def ttft_from_schedule_ms(r: RequestRecord) -> float | None:
    """TTFT from schedule = t_first − t_sched, in ms; free of coordinated omission."""
    return _to_ms(metrics_of(r).ttft_sched_ns)


def tpot_ms(r: RequestRecord) -> float | None:
    """TPOT = (t_last − t_first) / (n_out − 1), in ms (rounded to the ns); only when n_out ≥ 2."""
    return _to_ms(metrics_of(r).tpot_ns)


def ttfrt_ms(r: RequestRecord) -> float | None:
    """Time to first reasoning token = t_first_reasoning − t_send; None for a reply without reasoning."""
    return _to_ms(metrics_of(r).ttfrt_ns)


def ttfat_ms(r: RequestRecord) -> float | None:
    """Time to first answer token = t_first_answer − t_send: what the user waits for."""
    return _to_ms(metrics_of(r).ttfat_ns)


def ttftc_ms(r: RequestRecord) -> float | None:
    """Time to first tool-call token = t_first_tool − t_send."""
    return _to_ms(metrics_of(r).ttftc_ns)


def reasoning_ms(r: RequestRecord) -> float | None:
    """Reasoning duration = t_reasoning_end − t_first_reasoning (the thinking phase as seen)."""
    return _to_ms(metrics_of(r).reasoning_ns)


def answer_tpot_ms(r: RequestRecord) -> float | None:
    """Answer TPOT = (t_last_answer − t_first_answer) / (n_answer − 1); only when n_answer ≥ 2."""
    return _to_ms(metrics_of(r).answer_tpot_ns)


def e2e_ms(r: RequestRecord) -> float | None:
    """E2E = t_end − t_send, in ms."""
    return _to_ms(metrics_of(r).e2e_ns)


def itl_chunk_ms(r: RequestRecord) -> list[float]:
    """ITL per chunk: t_i − t_{i−1} between consecutive token-bearing events, in ms."""
    return [_ms(gap) for gap in metrics_of(r).itl_gaps_ns]


def itl_token_ms(r: RequestRecord) -> list[tuple[float, int]]:
    """ITL per token: (t_i − t_{i−1}) / k_i, to be recorded k_i times; as (value ms, weight k_i)."""
    gaps = metrics_of(r).itl_gaps_ns
    weighted = itl_token_weighted(gaps, r.event_tokens)
    if weighted is None:
        return [(_ms(gap), 1) for gap in gaps]
    return [(_ms(v), k) for v, k in zip(*weighted, strict=True)]
