"""The kinds section (loadkit/stats/kindstats.py): per target and kind rows whose figures are
the records' own, that merge exactly across nodes, and keep body kinds out of the engine's
streamed figures (E2E, TTFT) while their latency SLOs judge them."""

from __future__ import annotations

import random

from pytest import approx

from loadkit.records import RequestRecord
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.collector import StatsCollector
from loadkit.stats.kindstats import KindStats
from loadkit.stats.metrics import meets
from loadkit.types import OK

MS = 1_000_000
REL = 0.00098


def emb(
    i: int, latency_ms: float, items: int, outcome: str = OK, engine: str = "t", n_in: int = 10
) -> RequestRecord:
    send = 1_000 * MS + i * 10 * MS
    return RequestRecord(
        request_id=f"e{i}", engine=engine, adapter="openai", label="emb", outcome=outcome,
        t_start_ns=send, t_send_ns=send, t_end_ns=send + int(latency_ms * MS),
        n_in=n_in * items if outcome == OK else None, kind="embeddings", n_items=items,
        n_items_returned=items if outcome == OK else None,
    )  # fmt: skip


def chat(i: int, ttft_ms: float, e2e_ms: float) -> RequestRecord:
    send = 1_000 * MS + i * 10 * MS
    first, end = send + int(ttft_ms * MS), send + int(e2e_ms * MS)
    return RequestRecord(
        request_id=f"c{i}", engine="t", adapter="openai", label="chat", t_start_ns=send, t_send_ns=send,
        t_end_ns=end, event_t_ns=[first, end], event_tokens=[1, 1], n_in=20, n_out=2,
    )  # fmt: skip


def test_rows_per_kind_with_exact_counts_batches_and_rates():
    stats = KindStats(wall_offset_ns=0)
    records = [
        emb(0, 40, 4),
        emb(1, 80, 8),
        emb(2, 20, 1),
        emb(3, 5, 2, outcome="http_error"),
        chat(4, 10, 50),
    ]
    for r in records:
        r.measure()
        stats.add(r)
    rows = {row["kind"]: row for row in stats.report()["rows"]}
    assert [row["kind"] for row in stats.report()["rows"]] == ["chat", "embeddings"]
    e = rows["embeddings"]
    assert (e["requests"], e["ok"], e["failures"]) == (4, 3, {"http_error": 1})
    assert e["streamed"] is False and rows["chat"]["streamed"] is True
    # histogram midpoints: within 0.098 % (stats/histogram.py)
    assert e["latency_ms"]["count"] == 3 and e["latency_ms"]["p50"] == approx(40.0, rel=REL)
    assert e["latency_ms"]["p99"] == 80.0  # clamped into the exact max
    # per item: 40/4 = 10 and 80/8 = 10 ms; the one-input request has none (loadkit.formulas)
    assert e["latency_per_item_ms"]["count"] == 2 and e["latency_per_item_ms"]["p50"] == approx(10.0, rel=REL)
    assert e["items"] == 13 and e["input_tokens"] == 130
    assert e["batch_size"]["distribution"] == {"1": 1, "2": 1, "4": 1, "8": 1}
    assert e["batch_size"]["mean"] == 15 / 4 and e["batch_size"]["max"] == 8 and e["batch_size"]["p50"] == 2
    window = (1_000 + 40 + 50 - 1_000) / 1_000  # first start to chat's end, every kind
    assert e["window_s"] == rows["chat"]["window_s"] == window
    assert e["requests_per_s"] == 4 / window and e["items_per_s"] == 13 / window
    assert e["input_tokens_per_s"] == 130 / window
    assert (
        rows["chat"]["latency_ms"]["p50"] == 50.0
    )  # the only chat: min = max and rows["chat"]["batch_size"] is None


def test_merge_over_wire_equals_one_node_fed_everything():
    rng = random.Random(7)
    records = [emb(i, rng.uniform(1, 300), rng.randint(1, 64), engine=rng.choice("ab")) for i in range(400)]
    for r in records:
        r.measure()
    whole, parts = KindStats(0), [KindStats(0), KindStats(0), KindStats(0)]
    for i, r in enumerate(records):
        whole.add(r)
        parts[i % 3].add(r)
    merged = KindStats(0)
    for p in parts:
        merged.merge(KindStats.from_wire(p.to_wire()))
    assert merged.report() == whole.report()


def test_body_kinds_stay_out_of_engine_e2e_and_ttft_and_are_judged_on_latency():
    c = StatsCollector(slos={"ttft_ms": 100.0, "e2e_ms": 60.0, "latency_ms": 50.0})
    BuiltinSections(c).install()
    slow_embedding, fast_embedding, good_chat = emb(0, 70, 4), emb(1, 30, 4), chat(2, 20, 55)
    for r in (slow_embedding, fast_embedding, good_chat):
        c.add(r)
    # e2e_ms 60 judges the chat (55: met), not the embeddings; latency_ms 50 the embeddings only;
    # the missing TTFT of an embedding does not fail it.
    assert meets(fast_embedding, c.slos) is True
    assert c.report()["engines"]["t"]["slo"]["good"] == 2
    assert meets(slow_embedding, c.slos) is False
    assert meets(good_chat, {"latency_ms": 1.0, "e2e_ms": 60.0}) is True
    assert meets(fast_embedding, {"latency_per_item_ms": 7.0}) is False  # 30 / 4 = 7.5 ms per input
    report = c.report()
    engine = report["engines"]["t"]
    assert engine["e2e_ms"]["p50"] == 55.0 and engine["e2e_ms"]["p99"] == 55.0  # the chat's alone
    assert engine["ttft_ms"]["p99"] == 20.0
    kinds = {row["kind"]: row for row in report["kinds"]["rows"]}
    assert kinds["embeddings"]["latency_ms"]["p99"] == 70.0
    assert kinds["embeddings"]["requests_per_s"] * kinds["embeddings"]["window_s"] == 2
