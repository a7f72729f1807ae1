"""Synthetic RequestRecords with known timings (stats, report and failure tests)."""

from __future__ import annotations

import itertools

from loadkit.records import RequestRecord

MS = 1_000_000
BASE = 10_000 * 10**9  # a monotonic "now" far from zero
_ids = itertools.count()


def record(*, engine: str = "e", label: str = "default", outcome: str = "ok", send_ms: float = 0.0,
           ttft_ms: float | None = 100.0, gaps_ms: tuple[float, ...] = (10.0, 10.0), tokens: tuple[int, ...] | None = None,
           tail_ms: float = 1.0, n_in: int | None = 100, cached: int | None = None,
           sched_ms: float | None = None, n_out: int | None = None) -> RequestRecord:  # fmt: skip
    """A request sent at BASE + send_ms with first token after ttft_ms and later events after gaps_ms."""
    send = BASE + round(send_ms * MS)
    events: list[int] = []
    if ttft_ms is not None:
        t = send + round(ttft_ms * MS)
        events.append(t)
        for gap in gaps_ms:
            t += round(gap * MS)
            events.append(t)
    ks = list(tokens) if tokens is not None else [1] * len(events)
    end = (events[-1] if events else send) + round(tail_ms * MS)
    return RequestRecord(
        request_id=f"r{next(_ids)}", engine=engine, adapter="openai", label=label, outcome=outcome,
        t_sched_ns=None if sched_ms is None else BASE + round(sched_ms * MS), t_send_ns=send,
        t_end_ns=end, event_t_ns=events, event_tokens=ks, n_in=n_in,
        n_out=sum(ks) if n_out is None else n_out, n_out_source="usage", cached_tokens=cached,
    )  # fmt: skip


def image_record(count: int, pixels: int, ttft_ms: float, *, reported: int | None, expected: int,
                 n_in: int) -> RequestRecord:  # fmt: skip
    """A request with ``count`` images of ``pixels`` in all: image tokens as the server reported
    them (None: it did not) and as expected, its bytes (1,000 + pixels) and a send of 1 + count ms."""
    r = record(ttft_ms=ttft_ms, n_in=n_in)
    r.image_count, r.image_pixels, r.image_tokens, r.image_tokens_expected = count, pixels, reported, expected
    r.request_bytes = 1_000 + pixels
    r.t_sent_ns = r.t_send_ns + round((1 + count) * MS)
    return r


IMAGE_RECORDS = [
    image_record(0, 0, 20.0, reported=None, expected=0, n_in=50),
    image_record(1, 200_000, 40.0, reported=300, expected=290, n_in=350),
    image_record(2, 800_000, 60.0, reported=None, expected=1000, n_in=1040),
    image_record(6, 5_000_000, 90.0, reported=2000, expected=2100, n_in=2070),
]
