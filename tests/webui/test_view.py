"""The LLM table rows, their text form and the CSV, from real collector reports."""

from __future__ import annotations

import csv
import io

import pytest

from loadkit.stats import Slo, StatsCollector
from loadkit.webui import view
from tests.helpers.steady_records import record


def collector_with(records, slos=()) -> StatsCollector:
    c = StatsCollector(slos)
    for r in records:
        c.add(r)
    return c


def test_rows_per_engine_and_label_carry_report_numbers():
    recs = [record(engine="a", label="short", ttft_ms=10.0 * (i + 1)) for i in range(10)]
    recs += [record(engine="a", label="long", ttft_ms=200.0), record(engine="b", ttft_ms=50.0)]
    recs.append(record(engine="b", outcome="http_error:503"))
    report = collector_with(recs).report()
    rows = view.numeric_rows(report)
    assert [(r["engine"], r["label"]) for r in rows] == [
        ("a", "*"),
        ("a", "long"),
        ("a", "short"),
        ("b", "*"),
    ]
    a = rows[0]
    assert a["requests"] == 11 and a["failures"] == 0
    assert a["ttft_ms_p50"] == report["engines"]["a"]["ttft_ms"]["p50"]
    assert a["ttft_ms_p50"] == pytest.approx(60.0, rel=0.002)
    b = rows[3]
    assert b["failures"] == 1 and b["failed_outcomes"] == {"http_error:503": 1}


def test_display_rows_format_and_say_not_measured():
    report = collector_with([record(engine="x", outcome="timeout_first_token")]).report()
    (row,) = view.display_rows(view.numeric_rows(report))
    assert row["ttft_ms"] == "- / - / -"  # no ok request: not measured, never 0
    assert row["failed_outcomes"] == "timeout_first_token ×1"
    assert row["goodput_per_s"] == "-"  # no SLO given
    assert set(row) == {c["key"] for c in view.TABLE_STRUCTURE}


def test_the_llm_tab_names_its_fields_as_stats_json_does():
    """Each column of the LLM tab (Locust's /stats/requests, extended_stats "llm") is keyed by
    the stats.json row field it shows; a latency's cell holds its _p50 / _p90 / _p99."""
    report = collector_with([record(engine="x")]).report()
    (numeric,) = view.numeric_rows(report)
    for key in (c["key"] for c in view.TABLE_STRUCTURE):
        assert key in numeric or all(f"{key}_{p}" in numeric for p in view.PERCENTILES), key
    shown = view.display_row(numeric)
    assert shown["ttft_ms"] == " / ".join(f"{numeric[f'ttft_ms_{p}']:.1f}" for p in view.PERCENTILES)
    assert (shown["user_class"], shown["output_tokens_per_s"]) == (
        "*",
        f"{numeric['output_tokens_per_s']:.1f}",
    )


def test_goodput_shown_when_slos_are_set():
    recs = [record(send_ms=i * 100.0, ttft_ms=100.0 if i % 2 else 900.0) for i in range(10)]
    report = collector_with(recs, (Slo("ttft_ms", 500.0),)).report()
    (row,) = view.numeric_rows(report)
    assert row["goodput_per_s"] == pytest.approx(report["engines"]["e"]["goodput_per_s"])
    assert row["goodput_per_s"] > 0
    assert view.display_row(row)["goodput_per_s"] == f"{row['goodput_per_s']:.2f}"


def test_outcomes_most_frequent_first():
    assert view.fmt_outcomes({"a": 1, "b": 3, "c": 1}) == "b ×3, a ×1, c ×1"
    assert view.fmt_outcomes({}) == "-"


def test_csv_round_trips_numbers_and_empties():
    recs = [
        record(engine="a"),
        record(engine="a", outcome="disconnected"),
        record(engine="b", outcome="cancelled"),
    ]
    rows = view.numeric_rows(collector_with(recs).report())
    parsed = list(csv.DictReader(io.StringIO(view.rows_csv(rows))))
    assert [p["engine"] for p in parsed] == ["a", "b"]
    assert float(parsed[0]["ttft_ms_p50"]) == rows[0]["ttft_ms_p50"]
    assert parsed[0]["failed_outcomes"] == "disconnected=1"
    assert parsed[1]["ttft_ms_p50"] == ""  # not measured is an empty cell, not 0


def test_rows_per_user_class_follow_the_engine_rows():
    from loadkit.stats.classstats import ClassStats

    recs = [record(engine="a", label="short" if i % 2 else "long", ttft_ms=10.0 + i) for i in range(8)]
    recs.append(record(engine="b", label="x"))
    for i, r in enumerate(recs):
        r.user_class = "Chat" if i % 4 else "Agent"
    collector, classes = collector_with(recs), ClassStats()
    for r in recs:
        classes.add(r)
    collector.add_section("user_classes", classes.report)
    rows = view.numeric_rows(collector.report())
    keys = [(r["user_class"], r["engine"], r["label"]) for r in rows]
    assert keys == [("*", "a", "*"), ("*", "a", "long"), ("*", "a", "short"), ("*", "b", "*"),
                    ("Agent", "a", "*"), ("Agent", "b", "*"), ("Chat", "a", "*"), ("Chat", "a", "long"),
                    ("Chat", "a", "short")]  # fmt: skip
    by_key = dict(zip(keys, rows, strict=True))
    assert by_key[("Agent", "a", "*")]["requests"] == 2 and by_key[("Chat", "a", "*")]["requests"] == 6
    assert by_key[("Chat", "a", "*")]["itl_ms_p50"] is None  # ITL is not kept per class
    assert view.display_row(by_key[("Chat", "a", "short")])["user_class"] == "Chat"
    parsed = list(csv.DictReader(io.StringIO(view.rows_csv(rows))))
    assert [p["user_class"] for p in parsed][-1] == "Chat"


def test_the_header_says_what_ttft_is_and_shows_ttfat_beside_it():
    """Against a reasoning model TTFT is the first reasoning token: the column says so, and
    the time to first answer token is the next column (issue 31)."""
    keys = [c["key"] for c in view.TABLE_STRUCTURE]
    assert keys.index("ttfat_ms") == keys.index("ttft_ms") + 1
    titles = {c["key"]: c["title"] for c in view.TABLE_STRUCTURE}
    assert "reasoning included" in titles["ttft_ms"] and "first answer token" in titles["ttfat_ms"]
