"""The report's "Request kinds" section (loadkit/report/kinds.py): a table in report.html and a
console line per target and kind, shown only when a run sent a kind other than chat."""

from __future__ import annotations

from loadkit.records import RequestRecord
from loadkit.report.kinds import console_lines, kinds_section
from loadkit.stats.kindstats import KindStats

MS = 1_000_000


def report_of(*kinds: str) -> dict:
    stats = KindStats(0)
    for i, kind in enumerate(kinds):
        send = (100 + i) * MS
        r = RequestRecord(request_id=str(i), engine="t", adapter="openai", label="x", t_start_ns=send,
                          t_send_ns=send, t_end_ns=send + 30 * MS, n_in=12, kind=kind,
                          n_items=None if kind == "chat" else 3)  # fmt: skip
        if kind == "chat":
            r.event_t_ns, r.event_tokens = [send + 5 * MS], [1]
        r.measure()
        stats.add(r)
    return {"kinds": stats.report()}


def test_a_chat_only_run_shows_no_kinds_section():
    report = report_of("chat", "chat")
    assert kinds_section(report) == "" and console_lines(report) == []
    assert kinds_section({}) == ""  # a report from before the section


def test_rows_per_kind_in_html_and_console():
    report = report_of("chat", "rerank", "rerank", "<b>odd</b>")
    html = str(kinds_section(report))
    assert 'id="kinds"' in html and "Request kinds" in html
    assert html.count("<tr>") >= 4  # head + chat, rerank and the odd kind's rows
    assert "&lt;b&gt;odd&lt;/b&gt;" in html and "<b>odd" not in html  # escaped by the template
    lines = console_lines(report)
    assert len(lines) == 3 and lines[2].startswith("kind rerank @ t: 2 req (2 ok, failures 0)")
    assert "per item p50/p99 10.00/10.00 ms" in lines[2] and "batch mean 3.00 (p50/p99/max 3/3/3)" in lines[2]


def test_the_raw_log_e2e_the_charts_draw_is_the_streamed_requests(tmp_path):
    """report.html's E2E CDF (and compare) read the raw log: a body kind's latency stays out."""
    from loadkit.report.rawdata import load_raw
    from loadkit.stats.rawlog import RawLog

    log = RawLog(str(tmp_path / "requests.jsonl"))
    for i, kind in enumerate(("chat", "embeddings", "chat", "rerank")):
        send = (100 + i) * MS
        r = RequestRecord(request_id=str(i), engine="t", adapter="openai", t_start_ns=send, t_send_ns=send,
                          t_end_ns=send + (10 + i) * MS, kind=kind)  # fmt: skip
        if kind == "chat":
            r.event_t_ns, r.event_tokens = [send + MS], [1]
        r.measure()
        log.write(r)
    log.close()
    raw = load_raw(tmp_path)
    assert sorted(raw.values("e2e_ms", "t").tolist()) == [10.0, 12.0]
