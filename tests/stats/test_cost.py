"""Cost arithmetic: cost per hour, per 1M output tokens and requests, from the report's throughput."""

from __future__ import annotations

import pytest

from loadkit.stats.cost import CostRate, cost_section, per_million


def test_per_million_is_hourly_cost_over_an_hour_of_throughput():
    # 4 USD/h at 1000 tok/s: 3.6M tokens an hour, so 1M cost 4 / 3.6
    assert per_million(4.0, 1000.0) == pytest.approx(4 / 3.6)
    assert per_million(2.0, 1e6 / 3600) == pytest.approx(2.0)  # exactly 1M an hour: one hour's price
    assert per_million(4.0, 0.0) is None and per_million(4.0, None) is None


def test_cost_rate_multiplies_gpus():
    assert CostRate(2.5, 4).per_hour == 10.0


def report():
    stage_rows = [{"name": "a", "level": 2, "stats": {"output_tokens_per_s": 500.0, "requests_per_s": 5.0}},
                  {"name": "b", "level": 4, "stats": {"output_tokens_per_s": 900.0, "requests_per_s": 9.0}}]  # fmt: skip
    tier = {"name": "t", "whole_run": {"good_output_tokens_per_s": 360.0},
            "max_load": {"stage": "b", "level": 4, "output_tokens_per_s": 900.0, "requests_per_s": 9.0,
                         "good_output_tokens_per_s": 720.0}}  # fmt: skip
    return {
        "engines": {
            "gpu": {"output_tokens_per_s": 720.0, "ok_per_s": 7.2},
            "free": {"output_tokens_per_s": 1.0},
        },
        "stages": {
            "gpu": {"stages": stage_rows, "analysis": {"max_load_meeting_slos": {"stage": "a", "level": 2}}}
        },
        "slo_tiers": {"by_target": {"gpu": {"tiers": [tier]}}},
    }


def test_cost_section_quotes_each_throughput_it_uses():
    out = cost_section(report(), {"gpu": CostRate(3.0, 2)}, "EUR")
    assert set(out) == {"gpu"}  # a target without a price has no cost figures
    c = out["gpu"]
    assert (c["currency"], c["cost_per_hour"]) == ("EUR", 6.0)
    # 720 tok/s = 2.592M tok/h: 6 / 2.592 per 1M; 7.2 req/s = 25920 req/h
    assert c["measured"]["cost_per_1m_output_tokens"] == pytest.approx(6 / 2.592)
    assert c["measured"]["cost_per_1m_requests"] == pytest.approx(6 * 1e6 / 25920)
    best = c["max_load_meeting_slos"]
    assert (best["stage"], best["output_tokens_per_s"]) == ("a", 500.0)
    assert best["cost_per_1m_output_tokens"] == pytest.approx(6 * 1e6 / (500 * 3600))
    # the cost curve: one row per measured stage, each over its own throughput
    assert [(r["stage"], r["level"]) for r in c["stages"]] == [("a", 2), ("b", 4)]
    assert c["stages"][1]["cost_per_1m_requests"] == pytest.approx(6 * 1e6 / (9 * 3600))
    t = c["tiers"]["t"]
    assert t["cost_per_1m_good_output_tokens"] == pytest.approx(6 * 1e6 / (360 * 3600))
    assert t["max_load"]["cost_per_1m_output_tokens"] == pytest.approx(6 * 1e6 / (900 * 3600))
    assert t["max_load"]["cost_per_1m_good_output_tokens"] == pytest.approx(6 * 1e6 / (720 * 3600))


def test_no_throughput_is_not_measured_not_zero():
    out = cost_section(
        {"engines": {"gpu": {"output_tokens_per_s": None, "ok_per_s": 0}}}, {"gpu": CostRate(1.0)}, "USD"
    )
    assert out["gpu"]["measured"]["cost_per_1m_output_tokens"] is None
    assert out["gpu"]["measured"]["cost_per_1m_requests"] is None
