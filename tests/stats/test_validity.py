"""When a run is invalid, and the reasons the report gives."""

from __future__ import annotations

import msgpack
import pytest

from loadkit.report.console import final_summary, stream_end_lines
from loadkit.run.settings import stats_options
from loadkit.stats import StatsCollector
from loadkit.stats.options import failed_share_limit
from tests.helpers.records import record


def outcome(name: str, engine: str = "e"):
    r = record(engine=engine, outcome=name, ttft_ms=None)
    r.error = f"{name} happened"
    return r


def stopped(c: StatsCollector) -> dict:
    c.mark_stopped()
    return c.report()


def test_a_healthy_run_is_valid_with_no_reasons():
    c = StatsCollector()
    for i in range(10):
        c.add(record(send_ms=i))
    c.add(outcome("http_error:503"))
    report = stopped(c)
    assert report["valid"] is True and report["invalid_reasons"] == []


def test_no_ok_request_is_invalid_and_names_the_main_failure():
    c = StatsCollector()
    for _ in range(3):
        c.add(outcome("incomplete"))
    report = stopped(c)
    assert report["valid"] is False
    (reason,) = report["invalid_reasons"]
    assert reason.startswith("target e: no request succeeded (0 ok of 3)")
    assert "incomplete ×3: incomplete happened" in reason


def test_a_stopped_run_that_sent_nothing_is_invalid():
    assert stopped(StatsCollector())["invalid_reasons"] == ["no request was sent"]
    assert StatsCollector().report()["valid"] is True  # still starting: nothing to judge yet


def test_only_cancelled_requests_is_invalid_but_they_are_no_failures():
    c = StatsCollector()
    c.add(outcome("cancelled"))
    report = stopped(c)
    section = report["engines"]["e"]
    assert section["failures"] == 0 and section["cancelled"] == 1
    assert report["invalid_reasons"] == ["target e: no request finished: all 1 were cancelled by the stop"]


@pytest.mark.parametrize(("failures", "limit", "valid"), [(5, 0.5, True), (6, 0.5, False), (1, 0.0, False),
                                                           (9, 1.0, True)])  # fmt: skip
def test_failed_share_threshold_per_target(failures, limit, valid):
    c = StatsCollector()
    c.max_failed_share = limit
    for i in range(10 - failures):
        c.add(record(send_ms=i))
    for _ in range(failures):
        c.add(outcome("timeout_total"))
    c.add(outcome("cancelled"))  # never counts: neither failed nor judged
    c.add(record(engine="other"))
    report = stopped(c)
    assert report["valid"] is valid, report["invalid_reasons"]
    if not valid:
        (reason,) = report["invalid_reasons"]
        assert reason.startswith(f"target e: {10 * failures:.1f}% of requests failed ({failures} of 10")
        assert "--max-failed-share" in reason and "timeout_total ×" in reason


def test_marked_reasons_come_first_once_and_cross_the_wire():
    worker, master = StatsCollector(), StatsCollector()
    worker.add(record())
    worker.mark_invalid("circuit breaker: the first 20 requests all failed (connect_error); run stopped")
    worker.mark_invalid("circuit breaker: the first 20 requests all failed (connect_error); run stopped")
    payload = msgpack.unpackb(msgpack.packb(worker.snapshot_payload(final=True)), raw=False)
    master.accept_snapshot("w", payload)
    report = stopped(master)
    assert report["invalid_reasons"][0].startswith("circuit breaker: the first 20")
    assert len(report["invalid_reasons"]) == 1 and report["errors"] == []
    assert "  - circuit breaker: the first 20" in final_summary(report)


def test_outside_sources_and_stats_path_errors_are_reasons():
    c = StatsCollector()
    c.add(record())
    problem = {"now": "the run could not start: scenario x.toml: cannot read file"}
    c.add_invalid_source(lambda: [problem["now"]] if problem["now"] else [])
    c.fail("stats path failed on request r1", ValueError("boom"))
    reasons = stopped(c)["invalid_reasons"]
    assert reasons[0] == problem["now"] and "loadkit's stats path failed (1 error(s)" in reasons[1]
    problem["now"] = ""
    assert stopped(c)["invalid_reasons"] == [reasons[1]]


def test_stream_ends_are_counted_per_target():
    c = StatsCollector()
    for i in range(4):
        r = record(send_ms=i)
        r.end = "close" if i else "marker"
        c.add(r)
    report = stopped(c)
    assert report["engines"]["e"]["stream_ends"] == {"close": 3, "marker": 1}
    assert stream_end_lines(report) == [
        "e: 3 of 4 ok streams ended by a clean close after the last message, without the protocol's end marker (e.g. [DONE])"
    ]


def test_max_failed_share_option_in_percent():
    assert failed_share_limit(type("O", (), {"max_failed_share": 25.0})()) == 0.25
    assert failed_share_limit(type("O", (), {"max_failed_share": "30"})()) == 0.30  # typed in the web UI form
    with pytest.raises(ValueError, match="--max-failed-share: must be between 0 and 100"):
        failed_share_limit(type("O", (), {"max_failed_share": 150.0})())
    assert stats_options(None).max_failed_share == 0.5
