"""What the server said when requests failed: one short message per failure, counted per
outcome by template (numbers and ids masked), bounded per node, merged exactly across workers,
listed in report and console."""

from __future__ import annotations

import uuid

import msgpack

from loadkit.records import RequestRecord
from loadkit.report.console import final_summary
from loadkit.stats import StatsCollector
from loadkit.stats.messages import KEPT_PER_OUTCOME, MESSAGE_CHARS, MessageCounts, failure_message
from tests.helpers.records import record

DETAIL = "{\"detail\":\"Unexpected fields in the request: {'min_tokens', 'ignore_eos'}\"}"


def failed(outcome: str, error: str, status: int | None = None, engine: str = "e") -> RequestRecord:
    r = record(engine=engine, outcome=outcome, ttft_ms=None)
    r.error, r.http_status = error, status
    return r


def wire(payload: dict) -> dict:
    return msgpack.unpackb(msgpack.packb(payload), raw=False, strict_map_key=False)


def test_message_drops_the_status_prefix_collapses_space_and_is_cut():
    assert failure_message(failed("http_error:422", f"HTTP 422: {DETAIL}", 422)) == DETAIL
    assert (
        failure_message(failed("in_band_error", "  overloaded\n  retry\tlater ")) == "overloaded retry later"
    )
    long = failure_message(failed("http_error:500", "HTTP 500: " + "x" * 1000, 500))
    assert len(long) == MESSAGE_CHARS and long.endswith("…")
    assert failure_message(failed("http_error:502", "HTTP 502: ", 502)) == "(no message)"


def test_report_lists_messages_per_outcome_most_frequent_first_with_exact_totals():
    c = StatsCollector()
    for _ in range(5):
        c.add(failed("http_error:422", f"HTTP 422: {DETAIL}", 422))
    c.add(failed("http_error:400", 'HTTP 400: {"message":"model x not served; try tiny"}', 400))
    c.add(failed("http_error:400", "HTTP 400: bad", 400))
    c.add(failed("http_error:400", "HTTP 400: bad", 400))
    c.add(record())
    c.add(failed("cancelled", "cancelled: GreenletExit"))  # the test stopped it: no message
    messages = c.report()["engines"]["e"]["error_messages"]
    assert set(messages) == {"http_error:422", "http_error:400"}
    assert messages["http_error:422"] == {
        "total": 5,
        "other": 0,
        "top": [{"message": DETAIL, "count": 5, "template": DETAIL, "varied": False}],
    }
    assert [m["count"] for m in messages["http_error:400"]["top"]] == [2, 1]
    assert messages["http_error:400"]["top"][0]["message"] == "bad"


def words(i: int) -> str:
    """A distinct message without digits (digits would make them one template)."""
    return "".join(chr(ord("a") + int(d)) for d in str(i))


def test_distinct_messages_are_bounded_and_the_rest_counted_as_other():
    c = StatsCollector()
    for i in range(KEPT_PER_OUTCOME + 50):
        c.add(failed("http_error:500", f"HTTP 500: request {words(i)} failed", 500))
    entry = c.report()["engines"]["e"]["error_messages"]["http_error:500"]
    assert entry["total"] == KEPT_PER_OUTCOME + 50
    assert len(entry["top"]) == 10 and entry["other"] == entry["total"] - 10
    assert len(c.groups[("e", "default")].messages.kept["http_error:500"]) == KEPT_PER_OUTCOME


def test_workers_merge_message_counts_exactly():
    master, single = StatsCollector(), StatsCollector()
    workers = [StatsCollector(), StatsCollector()]
    for i in range(90):
        r = failed("in_band_error", f"shard {words(i % 3)} overloaded") if i % 2 else record(send_ms=i)
        workers[i % 2].add(r)
        single.add(r)
    for i, w in enumerate(workers):
        master.accept_snapshot(f"w{i}", wire(w.snapshot_payload(final=True)))
    merged = master.report()["engines"]["e"]["error_messages"]
    assert merged == single.report()["engines"]["e"]["error_messages"]
    assert merged["in_band_error"]["total"] == 45 and merged["in_band_error"]["other"] == 0
    assert sorted(m["count"] for m in merged["in_band_error"]["top"]) == [15, 15, 15]


def test_snapshot_from_a_worker_without_messages_still_merges():
    worker, master = StatsCollector(), StatsCollector()
    worker.add(failed("connect_error", "cannot connect to 127.0.0.1:9: [Errno 111] Connection refused"))
    payload = worker.snapshot_payload(final=True)
    for _, _, group in payload["groups"]:
        del group["messages"], group["ends"]  # what an older loadkit sends
    assert master.accept_snapshot("w", payload) == "accepted"
    section = master.report()["engines"]["e"]
    assert section["outcomes"] == {"connect_error": 1}
    assert section["error_messages"] == {}


def test_merge_of_full_counts_keeps_totals():
    a, b = MessageCounts(), MessageCounts()
    for i in range(KEPT_PER_OUTCOME):
        a.add("x", f"a {words(i)}")
        b.add("x", f"b {words(i)}")
    a.merge(b)
    assert sum(r.count for r in a.kept["x"].values()) + a.other.get("x", 0) == 2 * KEPT_PER_OUTCOME


def test_final_console_summary_says_what_the_server_said():
    c = StatsCollector()
    for _ in range(4941):
        c.add(failed("http_error:422", f"HTTP 422: {DETAIL}", 422, engine="vllm"))
    c.mark_stopped()
    text = final_summary(c.report())
    assert f"vllm             http_error:422 ×4941: {DETAIL}" in text
    assert "run INVALID:" in text and "no request succeeded (0 ok of 4941)" in text


CONTEXT = ("This model's maximum context length is 8192 tokens. However, you requested {} tokens ({} in the "
           "messages, 128 in the completion).")  # fmt: skip


def test_messages_differing_only_in_numbers_are_one_row_with_the_count_and_the_first_example():
    c = StatsCollector()
    asked = [10914, 9120, 12000, 10914, 8200]
    for i, n in enumerate(asked):
        r = failed("http_error:400", f"HTTP 400: {CONTEXT.format(n, n - 128)}", 400)
        r.t_end_ns = r.t_send_ns + 1_000_000 * (i + 1)
        c.add(r)
    c.add(failed("http_error:400", "HTTP 400: model 'x' is not served", 400))
    entry = c.report()["engines"]["e"]["error_messages"]["http_error:400"]
    assert entry["total"] == 6 and entry["other"] == 0
    assert entry["top"][0] == {
        "message": CONTEXT.format(10914, 10786),
        "count": 5,
        "varied": True,
        "template": CONTEXT.replace("{}", "<n>").replace("8192", "<n>").replace("128", "<n>"),
    }
    assert entry["top"][1]["count"] == 1 and entry["top"][1]["varied"] is False
    text = final_summary(c.report())
    assert f"http_error:400 ×5: e.g. {CONTEXT.format(10914, 10786)}" in text


def test_grouped_rows_merge_exactly_in_any_order_of_workers():
    """Counts add; the example is the earliest (ties: the text), whichever worker arrives first."""

    def collector() -> StatsCollector:  # one wall clock for all: the same offset on every node
        return StatsCollector(wall_clock_ns=lambda: 10**18, mono_clock_ns=lambda: 0)

    single, workers = collector(), [collector(), collector(), collector()]
    for i in range(60, 0, -1):  # a worker's first-counted request is not the earliest to end
        r = failed("in_band_error", f"KV cache full at {1000 + 7 * i} blocks, request {uuid.UUID(int=i)}")
        r.t_send_ns, r.t_end_ns = 1_000_000 * i, 1_000_000 * i + 500
        workers[(i * 7) % 3].add(r)
        single.add(r)
    payloads = [wire(w.snapshot_payload(final=True)) for w in workers]
    merged = []
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        master = StatsCollector()
        for k in order:
            master.accept_snapshot(f"w{k}", payloads[k])
        merged.append(master.report()["engines"]["e"]["error_messages"])
    assert merged[0] == merged[1] == merged[2] == single.report()["engines"]["e"]["error_messages"]
    (row,) = merged[0]["in_band_error"]["top"]
    assert row["count"] == 60 and row["varied"] is True and merged[0]["in_band_error"]["other"] == 0
    assert row["message"] == f"KV cache full at 1007 blocks, request {uuid.UUID(int=1)}"
    assert row["template"] == "KV cache full at <n> blocks, request <id>"


def test_an_older_workers_exact_text_pairs_are_grouped_on_arrival():
    old = {"kept": {"http_error:500": [["slot 3 busy", 2], ["slot 4 busy", 1], ["down", 1]]}, "other": {}}
    counts = MessageCounts.from_wire(old)
    section = counts.section({"http_error:500": 4})["http_error:500"]
    assert [(r["template"], r["count"], r["varied"]) for r in section["top"]] == [("slot <n> busy", 3, True),
                                                                                 ("down", 1, False)]  # fmt: skip
