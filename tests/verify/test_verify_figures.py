"""The oracle's own formulas, on values worked out by hand (docs/metrics.md's definitions)."""

from __future__ import annotations

from loadkit.verify.compare import Verdict
from loadkit.verify.figures import (
    itl_token_pairs,
    nearest_rank,
    rank,
    request_times_ns,
    weighted_nearest_rank,
)


def test_nearest_rank_is_the_ceiling_rank_without_float_noise():
    assert [rank(500, 10), rank(900, 10), rank(990, 10), rank(999, 10)] == [5, 9, 10, 10]
    assert rank(500, 1) == 1 and rank(990, 100) == 99 and rank(999, 1000) == 999 and rank(999, 1001) == 1000
    values = list(range(1, 101))
    assert (
        nearest_rank(values, 500) == 50
        and nearest_rank(values, 990) == 99
        and nearest_rank(values, 999) == 100
    )


def test_weighted_rank_counts_each_value_its_weight_times():
    pairs = [(1.0, 1), (2.0, 8), (9.0, 1)]  # 1, 2×8, 9: ten values
    assert weighted_nearest_rank(pairs, 500) == 2.0
    assert weighted_nearest_rank(pairs, 900) == 2.0 and weighted_nearest_rank(pairs, 990) == 9.0


def test_request_times_follow_the_definitions():
    r = {"t_sched_ns": 100, "t_start_ns": 150, "t_send_ns": 200, "t_first_ns": 1_200, "t_last_ns": 4_200,
         "t_end_ns": 5_000, "n_out": 4, "t_first_answer_ns": 2_200}  # fmt: skip
    t = request_times_ns(r)
    assert t["ttft_ms"] == 1_000 and t["ttft_sched_ms"] == 1_100 and t["ttft_with_connect_ms"] == 1_050
    assert t["tpot_ms"] == 1_000 and t["e2e_ms"] == 4_800 and t["ttfat_ms"] == 2_000
    assert t["ttfrt_ms"] is None and t["ttftc_ms"] is None
    # One token: no TPOT (not measured is None, never 0); TPOT rounds half up to whole ns.
    assert request_times_ns({**r, "n_out": 1})["tpot_ms"] is None
    assert request_times_ns({**r, "t_last_ns": 1_201, "n_out": 3})["tpot_ms"] == 1  # 0.5 ns -> 1


def test_itl_per_token_divides_each_gap_by_its_events_tokens():
    r = {"event_t_ns": [0, 10, 40], "event_tokens": [1, 2, 3]}
    assert itl_token_pairs(r) == [(5.0, 2), (10.0, 3)]
    assert itl_token_pairs({"event_t_ns": [0, 10, 40], "event_tokens": [1, 1, 1]}) == [(10, 1), (30, 1)]


def test_tolerance_is_the_resolution_plus_one_unit():
    v = Verdict()
    v.close("s", "k", "p99", 100.09, 100.0, 1e-6)  # 0.09 % off: within 2^-10
    v.close("s", "k", "p99", 100.2, 100.0, 1e-6)  # 0.2 % off: named
    v.exact("s", "k", "outcomes", {"ok": 3, "cancelled": 0}, {"ok": 3})  # a zero entry is no disagreement
    assert [str(d) for d in v.disagreements] == [
        "s / k / p99: report 100.2, recomputed 100.0 (tolerance 0.0976574)"
    ]
    assert v.checked == {"s": 3}
