"""The report's building blocks: raw-log reading, analysis maths, SVG scales, redaction."""

import math

import numpy as np
import orjson
import pytest

from loadkit.report import analysis
from loadkit.report.rawdata import read_raw_logs
from loadkit.report.redact import MASK, is_secret_key, redact, redact_argv
from loadkit.report.svg import Bars, Scale, Series, bar_plot, line_plot, log_ticks, nice_ticks
from loadkit.stats.histogram import MAX_RELATIVE_ERROR


def write_rows(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def test_raw_log_nulls_become_nan_and_columns_align(tmp_path):
    p = write_rows(tmp_path / "requests.jsonl", [
        {"engine": "a", "outcome": "ok", "ttft_ms": 5.0, "n_in": 10, "turn": None, "stage": "s1", "t_send_ns": 1},
        {"engine": "b", "outcome": "connect_error", "ttft_ms": None, "n_in": 300, "stage": None},
    ])  # fmt: skip
    raw = read_raw_logs([p])
    assert raw.rows == 2 and raw.engines() == ["a", "b"]
    assert raw.values("ttft_ms", "a").tolist() == [5.0]
    assert raw.values("ttft_ms", "b", ok_only=False).size == 0
    assert math.isnan(raw.columns["turn"][0]) and raw.columns["stage"][1] is None


def test_raw_logs_from_several_workers_are_concatenated(tmp_path):
    a = write_rows(tmp_path / "requests.worker0.jsonl", [{"engine": "a", "outcome": "ok", "ttft_ms": 1.0}])
    b = write_rows(
        tmp_path / "requests.worker1.jsonl", [{"engine": "a", "outcome": "ok", "ttft_ms": 2.0}, "junk"]
    )
    raw = read_raw_logs([a, b])
    assert raw.values("ttft_ms", "a").tolist() == [1.0, 2.0]
    assert raw.columns["file"].tolist() == [0, 1] and raw.malformed == 1


def test_cdf_from_values_ends_at_one_and_keeps_the_tail():
    values = np.arange(1, 10001, dtype=float)
    xs, ys = analysis.cdf_from_values(values)
    assert ys[-1] == 1.0 and xs[-1] == 10000.0 and xs[0] == 1.0
    assert sum(1 for y in ys if y > 0.99) == 100  # every rank of the top 1%
    assert len(xs) <= analysis.CDF_POINTS + 100
    assert all(b >= a for a, b in zip(xs, xs[1:], strict=False))


def test_cdf_from_summary_uses_the_reported_points():
    xs, ys = analysis.cdf_from_summary({"count": 3, "min": 1.0, "p50": 2.0, "p90": 3.0, "p95": None, "p99": 4.0,
                                        "p999": 4.0, "max": 5.0})  # fmt: skip
    assert xs == [1.0, 2.0, 3.0, 4.0, 4.0, 5.0] and ys == [0.0, 0.5, 0.9, 0.99, 0.999, 1.0]
    assert analysis.cdf_from_summary({"count": 0}) == ([], [])


def test_length_buckets_are_report_json_histograms_by_hand():
    """Buckets by the server's prompt count, from the lengths section (nearest rank), not the raw log."""
    from loadkit.report.grouped import bucket_rows
    from loadkit.stats.lengthstats import LengthStats
    from tests.helpers.records import record

    stats = LengthStats()
    for n_in, ttft in ((100, 10.0), (200, 20.0), (300, 30.0), (5000, 500.0), (20000, 900.0)):
        stats.add(record(engine="a", n_in=n_in, ttft_ms=ttft))
    stats.add(record(engine="a", outcome="timeout_total", n_in=100, ttft_ms=9999.0))
    stats.add(record(engine="a", n_in=None))  # no prompt count: in no bucket
    wire = LengthStats.from_wire(stats.to_wire())  # as a worker's share reaches the master
    got = {r["bucket"]: r for r in bucket_rows({"lengths": {"by_target": wire.report()}})["a"]}
    assert list(got) == ["<256", "256–1k", "4k–16k", "≥16k"]
    assert (got["<256"]["requests"], got["<256"]["ok"]) == (3, 2)  # the timeout is not a latency
    # Nearest rank of {10, 20}: 10, as its bucket's midpoint (interpolation said 15).
    assert got["<256"]["ttft_ms"]["p50"] == pytest.approx(10.0, rel=MAX_RELATIVE_ERROR)
    assert got["≥16k"]["ttft_ms"]["p99"] == pytest.approx(900.0, rel=MAX_RELATIVE_ERROR)
    assert got["256–1k"]["tpot_ms"]["p50"] == pytest.approx(10.0, rel=MAX_RELATIVE_ERROR)


def test_stage_and_turn_tables_quote_report_json():
    from loadkit.report.grouped import stage_rows, stages_section, turn_rows, turns_section

    stats = {
        "requests": 3,
        "ok": 2,
        "output_tokens": 20,
        "requests_per_s": 0.5,
        "output_tokens_per_s": 5.0,
        "ttft_ms": {"p50": 12.5, "p90": 40.25, "p99": 41.0},
        "tpot_ms": {"p50": 3.0, "p90": 3.0, "p99": 3.0},
    }
    report = {"stages": {"a": {"stages": [{"name": "s1", "level": 2, "duration_s": 4.0, "stats": stats},
                                          {"name": "s2", "level": 4, "duration_s": 4.0, "stats": None}]}},
              "sessions": {"a": {"sessions": 1, "completed": 1, "broken": 0,
                                 "turns": {"1": {"requests": 1, "ok": 1, "ttft_ms": {"count": 1, "p50": 100.0,
                                                 "p90": 100.0, "p99": 100.0}},
                                           "32+": {"requests": 1, "ok": 1, "ttft_ms": {"count": 1, "p50": 1.0}}}}}}  # fmt: skip
    assert [r["name"] for r in stage_rows(report)["a"]] == ["s1"]  # a stage without requests is no row
    assert "40.2" in stages_section(report) and "needs the raw log" not in stages_section(report)
    assert turn_rows(report) == {"a": [(1, 1, 100.0, 100.0, 100.0)]}
    assert "From report.json" in turns_section(report)


def test_ttft_over_time_is_nearest_rank(tmp_path):
    s = 1_000_000_000
    rows = [{"engine": "a", "outcome": "ok", "turn": 1, "ttft_ms": 100.0 if i % 2 == 0 else 10.0,
             "t_send_ns": i * s, "t_first_ns": i * s + s // 2} for i in range(6)]  # fmt: skip
    rows += [{"engine": "a", "outcome": "ok", "ttft_ms": 30.0, "t_send_ns": 0, "t_first_ns": s // 2}]
    raw = read_raw_logs([write_rows(tmp_path / "r.jsonl", rows)])
    ts = analysis.ttft_over_time(raw, "a")
    assert ts["t"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and ts["p50"][1] == 10.0
    assert ts["p50"][0] == pytest.approx(30.0, rel=1e-3)  # nearest rank of {100, 30}: 30 (interpolated: 65)


def test_ticks_are_round_and_cover_the_data():
    assert nice_ticks(0, 37) == [0, 10, 20, 30, 40]
    assert nice_ticks(0.2, 0.93)[0] <= 0.2 and nice_ticks(0.2, 0.93)[-1] >= 0.93
    assert log_ticks(3.2, 520) == [2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
    assert log_ticks(0.001, 20000)[0] == 0.001 and log_ticks(0.001, 20000)[-1] == 100000.0


def test_log_scale_maps_decades_evenly():
    s = Scale(1.0, 1000.0, True, 0.0, 300.0)
    assert s(1.0) == 0.0 and s(10.0) == pytest.approx(100.0) and s(1000.0) == pytest.approx(300.0)
    assert s(0.0) == 0.0  # clamped to the domain, never a math error


def test_line_plot_skips_undrawable_points_and_escapes():
    svg = line_plot(
        "p", "T <&>", [Series("x<y", [0.0, 1.0, None, 10.0], [0.1, 0.5, 0.7, 1.0])], "ms", "F", x_log=True
    )
    assert svg.startswith('<svg class="plot" data-plot="p"') and "T &lt;&amp;&gt;" in svg and "x&lt;y" in svg
    path = svg.split('class="series" d="')[1].split('"')[0]
    assert path.count("L") == 1  # 0 is not drawable on a log axis, None is skipped


def test_bar_plot_stacks_and_skips_none():
    svg = bar_plot("b", "t", ["e1", "e2"], [Bars("ok", [3.0, None], "#000"), Bars("err", [1.0, 2.0], "#f00")], "n",
                   stacked=True)  # fmt: skip
    assert svg.count('<rect class="series"') == 3


@pytest.mark.parametrize("key,secret", [("api_key", True), ("API-Key", True), ("hf_token", True), ("token", True),
                                        ("Authorization", True), ("password", True), ("max_tokens", False),
                                        ("output_tokens", False), ("n_out_source", False), ("tokens", False)])  # fmt: skip
def test_secret_keys(key, secret):
    assert is_secret_key(key) is secret


def test_redact_argv_and_strings():
    argv = ["--api-key", "K1", "--api-key=K2", "-H", "Authorization: Bearer K3", "--slo", "ttft_ms=500"]
    assert redact_argv(argv) == ["--api-key", MASK, f"--api-key={MASK}", "-H", MASK, "--slo", "ttft_ms=500"]
    got = redact({"url": "https://me:K4@h/x", "msg": "sent Bearer K5 and sk-abcdefghij", "n": 3})
    assert "K4" not in str(got) and "K5" not in str(got) and "abcdefghij" not in str(got) and got["n"] == 3
