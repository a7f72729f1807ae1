"""The report's adapter_errors: one row per target and kind, its count, first example and
traceback, a console line per kind on the node that saw it, merged exactly across workers."""

from __future__ import annotations

import logging

import msgpack

from loadkit.stats import StatsCollector
from loadkit.stats.adaptererrors import MAX_KINDS
from loadkit.stats.builtin import BuiltinSections
from tests.helpers.records import record

NAMED = (
    "engine 'flaky' (plugin loadkit-flaky 0.3, adapter flaky_plugin.FlakyAdapter): parse raised ValueError: "
)


def collector() -> StatsCollector:
    c = StatsCollector()
    BuiltinSections(c).install()
    return c


def failed(n: int, engine: str = "e", traceback: str | None = None, why: str = "cannot read chunk"):
    r = record(engine=engine, outcome="adapter_error", ttft_ms=None)
    r.error, r.traceback = f"{NAMED}{why} {n}", traceback
    return r


def wire(payload: dict) -> dict:
    return msgpack.unpackb(msgpack.packb(payload), raw=False, strict_map_key=False)


def test_kinds_are_counted_with_the_first_traceback_and_one_console_line_each(caplog):
    c = collector()
    with caplog.at_level(logging.ERROR, logger="loadkit.stats"):
        c.add(failed(1, traceback="Traceback (most recent call last): ..."))
        for n in range(2, 40):
            c.add(failed(n))
        c.add(failed(7, why="no such field"))
        c.add(record())  # ok: not an adapter error
    kinds = c.report()["adapter_errors"]["kinds"]
    assert [(k["count"], k["message"], k["traceback"]) for k in kinds] == [
        (39, f"{NAMED}cannot read chunk 1", "Traceback (most recent call last): ..."),
        (1, f"{NAMED}no such field 7", None)]  # fmt: skip
    assert kinds[0]["template"] == f"{NAMED}cannot read chunk <n>".replace("0.3", "<n>")
    lines = [r.getMessage() for r in caplog.records if "adapter_error" in r.getMessage()]
    assert len(lines) == 2 and lines[0].startswith(
        f"loadkit: target 'e': adapter_error: {NAMED}cannot read chunk 1 "
    )


def test_workers_merge_exactly_and_the_traceback_survives_the_wire():
    master, workers = collector(), [collector(), collector()]
    workers[1].add(failed(0, engine="b", traceback="Traceback: first on worker 1"))
    for n in range(1, 30):
        workers[n % 2].add(failed(n, engine="a" if n % 3 else "b"))
    for i, w in enumerate(workers):
        assert master.accept_snapshot(f"w{i}", wire(w.snapshot_payload(final=True))) == "accepted"
    section = master.report()["adapter_errors"]
    assert sorted((k["engine"], k["count"]) for k in section["kinds"]) == [("a", 20), ("b", 10)]
    b = next(k for k in section["kinds"] if k["engine"] == "b")
    assert b["traceback"] == "Traceback: first on worker 1" and b["message"] == f"{NAMED}cannot read chunk 0"
    assert section["other"] == 0


def test_kinds_are_bounded_and_the_rest_counted():
    c = collector()
    for n in range(MAX_KINDS + 5):
        c.add(failed(0, why="kind " + "".join(chr(ord("a") + int(d)) for d in str(n))))
    section = c.report()["adapter_errors"]
    assert len(section["kinds"]) == MAX_KINDS and section["other"] == 5
