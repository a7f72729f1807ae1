"""The report's building blocks: raw-log reading, analysis maths, SVG scales, redaction."""

import math

import numpy as np
import orjson
import pytest

from loadkit.report import analysis
from loadkit.report.rawdata import read_raw_logs
from loadkit.report.redact import MASK, is_secret_key, redact, redact_argv
from loadkit.report.svg import Bars, Scale, Series, bar_plot, line_plot, log_ticks, nice_ticks


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


def rows_for_buckets():
    rows = []
    for n_in, ttft in ((100, 10.0), (200, 20.0), (300, 30.0), (5000, 500.0), (20000, 900.0)):
        rows.append(
            {"engine": "a", "outcome": "ok", "n_in": n_in, "ttft_ms": ttft, "tpot_ms": 5.0, "e2e_ms": 99.0}
        )
    rows.append({"engine": "a", "outcome": "timeout_total", "n_in": 100, "ttft_ms": 9999.0})
    return rows


def test_length_buckets_by_hand(tmp_path):
    raw = read_raw_logs([write_rows(tmp_path / "r.jsonl", rows_for_buckets())])
    got = {r.bucket: r for r in analysis.length_buckets(raw, "a")}
    assert list(got) == ["<256", "256–1k", "4k–16k", "≥16k"]
    assert got["<256"].count == 2 and got["<256"].ttft_p50 == 15.0  # the timeout is not a latency
    assert got["≥16k"].ttft_p99 == 900.0 and got["256–1k"].tpot_p50 == 5.0


def test_stages_in_start_order_with_achieved_rates(tmp_path):
    s = 1_000_000_000
    rows = [{"engine": "a", "outcome": "ok", "stage": "high", "t_send_ns": 10 * s + i * s // 10, "t_end_ns": 12 * s,
             "n_out": 100, "ttft_ms": 50.0, "tpot_ms": 9.0} for i in range(10)]  # fmt: skip
    rows += [{"engine": "a", "outcome": "ok", "stage": "low", "t_send_ns": 0, "t_end_ns": 4 * s, "n_out": 10,
              "ttft_ms": 5.0, "tpot_ms": 3.0}, {"engine": "a", "outcome": "cancelled", "stage": "low", "t_send_ns": s}]  # fmt: skip
    raw = read_raw_logs([write_rows(tmp_path / "r.jsonl", rows)])
    low, high = analysis.stages(raw, "a")
    assert (low.stage, low.sent, low.ok, low.window_s) == ("low", 2, 1, 4.0)
    assert low.requests_per_s == 0.5 and low.output_tokens_per_s == 2.5
    assert high.window_s == 2.0 and high.output_tokens_per_s == 500.0 and high.ttft_p99 == 50.0


def test_per_turn_and_ttft_over_time(tmp_path):
    s = 1_000_000_000
    rows = [{"engine": "a", "outcome": "ok", "turn": 1 + i % 2, "ttft_ms": 100.0 if i % 2 == 0 else 10.0,
             "t_send_ns": i * s, "t_first_ns": i * s + s // 2} for i in range(6)]  # fmt: skip
    raw = read_raw_logs([write_rows(tmp_path / "r.jsonl", rows)])
    assert analysis.per_turn(raw, "a") == [(1, 3, 100.0, 100.0, 100.0), (2, 3, 10.0, 10.0, 10.0)]
    ts = analysis.ttft_over_time(raw, "a")
    assert ts["t"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and ts["p50"][0] == 100.0 and ts["p50"][1] == 10.0


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
