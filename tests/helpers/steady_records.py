"""Synthetic RequestRecords with known timings and one token every gap (web UI and class-stats
tests); tests/helpers/records.py builds records with gaps of their own."""

from __future__ import annotations

import itertools

from loadkit.records import RequestRecord

MS = 1_000_000
BASE = 10_000 * 10**9  # a monotonic "now" far from zero
_ids = itertools.count()


def record(*, engine: str = "e", label: str = "default", outcome: str = "ok", send_ms: float = 0.0,
           ttft_ms: float = 100.0, gap_ms: float = 10.0, tokens: int = 5) -> RequestRecord:  # fmt: skip
    """Sent at BASE + send_ms; first token after ttft_ms, then one token every gap_ms."""
    send = BASE + round(send_ms * MS)
    events = [send + round((ttft_ms + i * gap_ms) * MS) for i in range(tokens)]
    return RequestRecord(
        request_id=f"w{next(_ids)}", engine=engine, adapter="openai", label=label, outcome=outcome,
        t_send_ns=send, t_end_ns=events[-1] + MS, event_t_ns=events, event_tokens=[1] * tokens,
        n_in=10, n_out=tokens, n_out_source="usage",
    )  # fmt: skip
