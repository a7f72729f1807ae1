"""A target's reachability changes from finished requests (no clock: their own timestamps)."""

from __future__ import annotations

import logging

from loadkit.locust.reachability import Reachability, Record
from loadkit.records import RequestRecord


def rec(outcome: str, sent_s: float, headers: bool = False, engine: str = "a") -> RequestRecord:
    r = RequestRecord(request_id="x", engine=engine, adapter="openai", outcome=outcome,
                      error="cannot connect to 127.0.0.1:9: [Errno 111] Connection refused"
                      if outcome == "connect_error" else None)  # fmt: skip
    r.t_send_ns = int(sent_s * 1e9)
    r.t_end_ns = r.t_send_ns + 1000
    r.t_headers_ns = r.t_send_ns + 500 if headers else None
    return r


def test_down_once_and_back_only_on_an_answer_to_a_later_request():
    r = Reachability()
    assert r.observe(rec("ok", 1.0, headers=True)) is None
    down = r.observe(rec("connect_error", 5.0))
    assert down is not None and down["event"] == "unreachable" and "Connection refused" in down["error"]
    assert r.observe(rec("connect_error", 5.5)) is None  # said once
    # A stream cut by the death, sent before it, ends after the first refusal: not a return.
    assert r.observe(rec("disconnected", 4.0, headers=True)) is None
    # Sent later but never answered (a kept-alive connection to the dead server): not back.
    assert r.observe(rec("incomplete", 6.0)) is None
    assert r.observe(rec("connect_error", 7.0, engine="b"))["target"] == "b"  # each target apart
    back = r.observe(rec("http_error:503", 8.0, headers=True))
    assert back is not None and back["event"] == "reachable" and back["target"] == "a"
    assert r.observe(rec("ok", 9.0, headers=True)) is None


def test_record_prints_each_change_once_across_workers(caplog):
    record = Record()
    with caplog.at_level(logging.WARNING, logger="loadkit"):
        record.add({"target": "a", "event": "unreachable", "t": 100.0, "error": "connect_error: refused"}, 0)
        record.add({"target": "a", "event": "unreachable", "t": 100.4, "error": "connect_error: refused"}, 1)
        record.add({"target": "a", "event": "reachable", "t": 104.25}, 1)
        record.add({"target": "a", "event": "reachable", "t": 104.5}, 0)
    lines = [m.getMessage() for m in caplog.records]
    assert (
        len(lines) == 2
        and "target 'a' unreachable since" in lines[0]
        and "(connect_error: refused)" in lines[0]
    )
    assert lines[1] == "loadkit: target 'a' reachable again after 4.2 s"
    assert record.manifest() == {"reachability": {"a": [
        {"event": "unreachable", "t": 100.0, "error": "connect_error: refused", "worker": 0},
        {"event": "reachable", "t": 104.25, "after_s": 4.2, "worker": 1}]}}  # fmt: skip
