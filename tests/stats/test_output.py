"""report.json schema, CSV files, console table, raw log flushing, options."""

from __future__ import annotations

import argparse
import csv
import io
import json

import orjson
import pytest

from loadkit.report.console import console_table
from loadkit.report.files import write_atomic, write_reports
from loadkit.run.settings import stats_options
from loadkit.stats import SCHEMA, Slo, StatsCollector, add_stats_arguments
from loadkit.stats.options import parse_slo_item
from loadkit.stats.rawlog import RawLog, raw_log_name
from tests.helpers.records import record

S_KEYS = {"count", "mean", "min", "max", "p50", "p90", "p95", "p99", "p999"}
REQUIRED = {"requests", "outcomes", "output_tokens", "output_tokens_per_s", "requests_per_s", "ttft_ms",
            "tpot_ms", "itl_ms", "itl_chunk_ms", "e2e_ms", "labels"}  # fmt: skip
RAW_KEYS = {"request_id", "engine", "label", "outcome", "ttft_ms", "tpot_ms", "e2e_ms", "n_in", "n_out",
            "n_out_source", "t_send_ns", "t_first_ns"}  # fmt: skip


def _report(slos: tuple[Slo, ...] = (Slo("ttft_ms", 500.0),)) -> dict:
    c = StatsCollector(slos)
    c.set_manifest_fields({"scenario": "unit"})
    for i in range(20):
        c.add(record(engine="fast", label="chat" if i % 2 else "rag", send_ms=i * 50, ttft_ms=10 + i))
    c.add(record(engine="slow", outcome="http_error:503", ttft_ms=None))
    return c.report()


def test_report_has_the_required_shape():
    report = json.loads(orjson.dumps(_report()))  # JSON-able as is
    assert report["schema"] == SCHEMA == "loadkit.report/1"
    assert report["manifest"]["scenario"] == "unit" and report["manifest"]["slos"] == {"ttft_ms": 500.0}
    assert {"valid", "warnings", "errors", "conservation", "workers", "engines"} <= set(report)
    for engine in report["engines"].values():
        assert REQUIRED <= set(engine)
        for metric in (
            "ttft_ms",
            "ttft_sched_ms",
            "tpot_ms",
            "itl_ms",
            "itl_chunk_ms",
            "e2e_ms",
            "n_in",
            "n_out",
        ):
            assert set(engine[metric]) == S_KEYS
        for label in engine["labels"].values():
            assert REQUIRED - {"labels"} <= set(label)
    slow = report["engines"]["slow"]
    assert slow["ttft_ms"]["p50"] is None and slow["ttft_ms"]["count"] == 0  # not measured: None, not 0


def test_write_reports_creates_parseable_files(tmp_path):
    report = _report()
    paths = write_reports(report, str(tmp_path / "out"))
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["report.json", "stats.csv", "timeseries.csv"]
    assert json.loads((tmp_path / "out" / "report.json").read_text())["engines"].keys() == {"fast", "slow"}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "stats.csv").read_text())))
    assert [(r["engine"], r["label"]) for r in rows] == [("fast", "*"), ("fast", "chat"), ("fast", "rag"),
                                                         ("slow", "*"), ("slow", "default")]  # fmt: skip
    fast = rows[0]
    assert int(fast["requests"]) == 20
    assert float(fast["ttft_ms_p50"]) == pytest.approx(report["engines"]["fast"]["ttft_ms"]["p50"])
    assert rows[3]["ttft_ms_p50"] == ""  # None → empty cell
    series = list(csv.DictReader(io.StringIO((tmp_path / "out" / "timeseries.csv").read_text())))
    assert sum(int(r["requests"]) for r in series if r["engine"] == "fast") == 20
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".tmp-")]


def test_atomic_write_replaces_whole_file_and_cleans_up_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    write_atomic(str(path), b"old")
    monkeypatch.setattr("os.replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        write_atomic(str(path), b"new")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_console_table_shows_each_engine():
    table = console_table(_report())
    lines = table.splitlines()
    assert lines[1].split()[:3] == ["engine", "reqs", "fails"]
    fast = next(line for line in lines if line.startswith("fast"))
    slow = next(line for line in lines if line.startswith("slow"))
    assert fast.split()[1:3] == ["20", "0"] and slow.split()[1:3] == ["1", "1"]
    assert "-/-/-" in slow  # nothing measured


def test_raw_log_lines_and_flush_within_a_second(tmp_path):
    now = [0]
    path = tmp_path / raw_log_name(None)
    log = RawLog(str(path), clock_ns=lambda: now[0])
    log.write(record())
    assert path.read_bytes() == b""  # buffered ...
    now[0] = 999_000_000
    log.write(record())
    assert path.read_bytes() == b""
    now[0] = 1_000_000_000  # ... until the oldest line is a second old
    log.write(record())
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and RAW_KEYS <= set(json.loads(lines[0]))
    log.write(record(outcome="cancelled"))
    log.flush_pending()  # the glue's 1 s timer
    assert json.loads(path.read_text().splitlines()[-1])["outcome"] == "cancelled"
    log.close()


def test_raw_log_names():
    assert raw_log_name(None) == "requests.jsonl" and raw_log_name(3) == "requests.worker3.jsonl"


def test_collector_writes_raw_log(tmp_path):
    c = StatsCollector(raw_log=RawLog(str(tmp_path / "requests.jsonl")))
    r = record()
    c.add(r)
    c.raw_log.close()
    row = json.loads((tmp_path / "requests.jsonl").read_text())
    assert row["request_id"] == r.request_id and row["t_first_ns"] == r.event_t_ns[0]


def test_raw_log_lines_carry_the_process_offset_max_tokens_and_last_answer_time(tmp_path):
    """What the oracle needs to put lines of several processes on one timeline (the offset the
    collector's windows use), the output length asked, and the last answer token's time."""
    c = StatsCollector(raw_log=RawLog(str(tmp_path / "requests.jsonl")))
    r = record()
    r.max_tokens = 17
    r.t_first_answer_ns, r.t_last_answer_ns, r.n_answer = r.event_t_ns[0], r.event_t_ns[-1], len(r.event_t_ns)
    c.add(r)
    c.raw_log.close()
    row = json.loads((tmp_path / "requests.jsonl").read_text())
    assert row["t_wall_offset_ns"] == c.wall_offset_ns and isinstance(row["t_wall_offset_ns"], int)
    assert row["max_tokens"] == 17 and row["t_last_answer_ns"] == r.event_t_ns[-1]
    assert row["t_first_answer_ns"] == r.event_t_ns[0]


def test_session_ends_go_to_the_session_log_beside_the_raw_log(tmp_path):
    from types import SimpleNamespace

    from loadkit.stats.rawlog import session_line, session_log_path

    assert session_log_path(str(tmp_path / "requests.worker2.jsonl")) == str(
        tmp_path / "sessions.worker2.jsonl"
    )
    log = RawLog(str(tmp_path / raw_log_name(None)), truncate=True)
    done = SimpleNamespace(
        session_id="s1", status="completed", broken_reason=None, end_reason="turns_done", turns_sent=4
    )
    stopped = SimpleNamespace(session_id="s2", status="broken", broken_reason="cancelled", turns_sent=2)
    log.write_session(session_line("a", done, 4))
    log.write_session(session_line("a", stopped, 2))
    lines = [json.loads(x) for x in (tmp_path / "sessions.jsonl").read_text().splitlines()]  # flushed at once
    assert lines == [
        {
            "session_id": "s1",
            "engine": "a",
            "status": "completed",
            "ended_by": "turns_done",
            "at_turn": 4,
            "turns_sent": 4,
        },
        {
            "session_id": "s2",
            "engine": "a",
            "status": "broken",
            "ended_by": "cancelled",
            "at_turn": 2,
            "turns_sent": 2,
        },
    ]
    log.close()
    log.write_session(session_line("a", done, 4))  # after the stats closed: not written, no error
    assert len((tmp_path / "sessions.jsonl").read_text().splitlines()) == 2
    assert (tmp_path / "requests.jsonl").read_text() == ""  # the request log stays one line per request


def test_raw_log_events_adds_every_event_arrival(tmp_path):
    plain, full = RawLog(str(tmp_path / "a.jsonl")), RawLog(str(tmp_path / "b.jsonl"), events=True)
    r = record()
    plain.write(r)
    full.write(r)
    plain.close()
    full.close()
    assert "event_t_ns" not in json.loads((tmp_path / "a.jsonl").read_text())
    row = json.loads((tmp_path / "b.jsonl").read_text())
    assert row["event_t_ns"] == r.event_t_ns and row["event_tokens"] == r.event_tokens
    assert len(row["event_t_ns"]) == row["n_events"] >= 2
    assert row["event_t_ns"][0] == row["t_first_ns"] and row["event_t_ns"][-1] == row["t_last_ns"]


def _parser():
    from locust.argument_parser import get_empty_argument_parser

    parser = get_empty_argument_parser()
    add_stats_arguments(parser)
    return parser


@pytest.mark.in_process_locust
def test_options_parse_and_round_trip_through_parsed_options(monkeypatch):
    monkeypatch.delenv("LOADKIT_SLO", raising=False)
    parsed = _parser().parse_args(["--slo", "ttft_ms=500", "--slo", "tpot_ms=50,e2e_ms=9000", "--slo", "ttft_ms=400",
                                   "--raw-log", "--report-dir", "out", "--stats-interval", "2",
                                   "--raw-log-events"])  # fmt: skip
    opts = stats_options(parsed)
    assert opts.report_dir == "out" and opts.raw_log and opts.stats_interval == 2.0 and opts.console_table
    assert opts.raw_log_events
    assert {s.key: s.limit_ms for s in opts.slos} == {"ttft_ms": 400.0, "tpot_ms": 50.0, "e2e_ms": 9000.0}
    assert all(isinstance(v, str) for v in parsed.slo)  # crosses Locust's msgpack wire to workers


@pytest.mark.in_process_locust
def test_options_defaults(monkeypatch):
    for var in ("LOADKIT_REPORT_DIR", "LOADKIT_RAW_LOG", "LOADKIT_SLO", "LOADKIT_RAW_LOG_EVENTS"):
        monkeypatch.delenv(var, raising=False)
    opts = stats_options(_parser().parse_args([]))
    assert opts.report_dir.startswith("reports/") and not opts.raw_log and opts.slos == ()
    assert not opts.raw_log_events
    assert opts.final_report_wait == 5.0


@pytest.mark.in_process_locust
def test_web_ui_visibility_is_deliberate():
    shown = set(_parser().args_included_in_web_ui)
    # SLOs belong in the start form (issue: options in the form); console switches do not.
    assert {"report_dir", "raw_log", "slo"} <= shown
    assert not {"stats_interval", "no_console_table", "final_report_wait"} & shown


@pytest.mark.in_process_locust
@pytest.mark.parametrize("bad", ["ttft=5", "ttft_ms", "ttft_ms=abc", "tpot_ms=-1", "ttft_ms=0"])
def test_bad_slo_is_a_clear_argparse_error(bad):
    with pytest.raises(argparse.ArgumentTypeError, match="--slo"):
        parse_slo_item(bad)
