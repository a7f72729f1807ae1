"""Cost and SLO tiers in the console, report.html and `loadkit compare` (rows and --fail-if)."""

from __future__ import annotations

import orjson
import pytest

from loadkit.report.compare import compare_runs
from loadkit.report.console import final_summary
from loadkit.report.page import build_html
from loadkit.stats.cost import CostRate, cost_section
from tests.report.conftest import make_rows, write_run


def tier(name, slos, attainment, level, tokens_per_s):
    top = None if level is None else {"stage": f"u{level}", "level": level, "level_kind": "users",
                                      "output_tokens_per_s": tokens_per_s, "requests_per_s": tokens_per_s / 10,
                                      "goodput_rps": 1.0, "good_output_tokens_per_s": tokens_per_s * 0.95}  # fmt: skip
    return {"name": name, "slos": slos, "stages": [top] if top else [{"stage": "u1"}], "max_load": top,
            "whole_run": {"judged": 100, "good": round(attainment * 100), "attainment": attainment,
                          "good_output_tokens_per_s": 300.0}}  # fmt: skip


def priced_run(folder, seed, price, tight_level):
    """A run's report.json with the slo_tiers section a sweep writes, and its cost section."""
    folder = write_run(folder, {"e": make_rows("e", 200, seed)})
    report = orjson.loads((folder / "report.json").read_bytes())
    report["slo_tiers"] = {"attainment_target": 0.9, "by_target": {"e": {"tiers": [
        tier("tight", {"ttft_ms": 30.0, "tpot_ms": 20.0}, 0.5, tight_level, 400.0),
        tier("loose", {"ttft_ms": 400.0}, 0.97, 16, 1000.0)]}}}  # fmt: skip
    report["cost"] = cost_section(report, {"e": CostRate(price, 2)}, "USD")
    (folder / "report.json").write_bytes(orjson.dumps(report))
    return folder, report


def test_console_lines_state_cost_currency_and_tiers(tmp_path):
    _, report = priced_run(tmp_path / "a", 1, 2.5, 4)
    text = final_summary(report)
    assert "cost e: 5.00 USD/h (2 GPU x 2.5); per 1M output tokens" in text
    assert "tier tight [ttft_ms=30,tpot_ms=20] e: attainment 50.0%; max load u4 (users 4)" in text
    expected = 5.0 * 1e6 / (400.0 * 3600)
    assert f"{expected:.3f} USD/1M tok there" in text


def test_html_section_has_both_tables_and_the_caveat(tmp_path):
    _, report = priced_run(tmp_path / "a", 1, 2.5, None)
    html = build_html(report)
    assert '<section id="cost"><h2>Cost and SLO tiers</h2>' in html
    assert "none met" in html  # the tight tier met no stage
    assert "not a price quote" in html
    del report["cost"], report["slo_tiers"]
    assert 'id="cost"' not in build_html(report)  # nothing asked: no box


def test_compare_rows_and_fail_if_on_cost_and_tier_max_load(tmp_path):
    a, _ = priced_run(tmp_path / "a", 1, 2.0, 8)
    b, _ = priced_run(tmp_path / "b", 2, 3.0, 4)  # dearer GPUs; tight tier held only to 4 users
    result = compare_runs([str(a), str(b)], rules=["cost_per_1m_output_tokens>+10%", "slo_tiers.tight.max_load<0",
                                                   "slo_tiers.loose.max_load<0"], with_raw=False)  # fmt: skip
    rows = {r["metric"]: r for r in result["comparisons"][0]["metrics"]}
    assert rows["slo_tiers.tight.max_load"]["a"] == 8 and rows["slo_tiers.tight.max_load"]["b"] == 4
    cost_a, cost_b = rows["cost_per_1m_output_tokens"]["a"], rows["cost_per_1m_output_tokens"]["b"]
    # price 1.5x, divided by each run's own measured throughput (the table's output tok/s row)
    ta, tb = rows["output_tokens_per_s"]["a"], rows["output_tokens_per_s"]["b"]
    assert cost_b / cost_a == pytest.approx(1.5 * ta / tb) and cost_b > 1.1 * cost_a
    fired = {r["rule"]: r["fired"] for r in result["rules"]}
    assert fired == {"cost_per_1m_output_tokens>+10%": True, "slo_tiers.tight.max_load<0": True,
                     "slo_tiers.loose.max_load<0": False}  # fmt: skip
    assert result["exit_code"] == 1


def test_a_run_without_a_price_fails_a_cost_gate_as_not_measured(tmp_path):
    a, _ = priced_run(tmp_path / "a", 1, 2.0, 8)
    b = write_run(tmp_path / "b", {"e": make_rows("e", 200, 2)})
    result = compare_runs([str(a), str(b)], rules=["cost_per_1m_output_tokens>+10%"], with_raw=False)
    assert result["rules"][0]["fired"] and "not measured" in result["rules"][0]["details"][0]
