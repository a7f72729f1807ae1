from loadkit.records import RequestRecord
from loadkit.stats.stagestats import StageStats, analyse, stage_plan


def rec(stage, ttft_ms, n_out=10, outcome="ok", engine="e"):
    r = RequestRecord(
        request_id=f"{stage}{ttft_ms}{n_out}", engine=engine, adapter="openai", outcome=outcome, stage=stage
    )
    r.t_send_ns = 0
    if outcome == "ok":
        r.event_t_ns = [int(ttft_ms * 1e6), int((ttft_ms + 100) * 1e6)]
        r.event_tokens = [1, n_out - 1]
        r.n_out = n_out
        r.t_end_ns = r.event_t_ns[-1]
    return r


def row(level, tput, ttft, att=1.0):
    return {
        "name": f"l{level}",
        "level": level,
        "stats": {
            "output_tokens_per_s": tput,
            "ttft_ms": {"p50": ttft},
            "slo_attainment": att,
            "goodput_rps": 1.0,
        },
    }


def test_analysis_finds_saturation_and_best_level():
    rows = [row(1, 100, 10), row(2, 190, 11), row(4, 370, 12), row(8, 380, 40, 0.5), row(16, 385, 90, 0.0)]
    a = analyse(rows)
    assert a["saturation"]["level"] == 8
    assert a["max_load_meeting_slos"]["level"] == 4


def test_no_saturation_while_throughput_keeps_rising():
    a = analyse([row(1, 100, 10), row(2, 200, 30), row(4, 400, 60)])
    assert a["saturation"] is None


def test_stage_stats_per_stage_summary_and_slos_and_merge():
    a, b = StageStats({"ttft_ms": 50}), StageStats({"ttft_ms": 50})
    for i in range(10):
        (a if i % 2 else b).add(rec("stage1", 10 + i))
    a.add(rec("stage2", 100))
    a.add(rec("stage2", 0, outcome="http_error:500"))
    merged = StageStats()
    merged.merge(a)
    merged.merge(b)
    plan = stage_plan(
        {"model": "closed", "stages": [{"duration_s": 10, "users": 2}, {"duration_s": 5, "users": 4}]}
    )
    out = merged.report(plan)["e"]["stages"]
    s1, s2 = out[0]["stats"], out[1]["stats"]
    assert out[0]["level"] == 2 and out[1]["level"] == 4
    assert s1["requests"] == 10 and s1["output_tokens_per_s"] == 10.0 and s1["slo_attainment"] == 1.0
    assert s2["requests"] == 2 and s2["ok"] == 1 and s2["slo_attainment"] == 0.0
    assert abs(s1["ttft_ms"]["p50"] - 14.0) <= 14.0 * 1e-3  # histogram precision


def test_plan_with_warmup_and_open_loop_levels():
    plan = stage_plan({"model": "poisson", "stages": [{"duration_s": 3, "rate": 5.0}]}, warmup_s=2)
    assert plan[0]["name"] == "warmup" and plan[0]["warmup"]
    assert plan[1] == {"name": "stage1", "level": 5.0, "level_kind": "rate", "duration_s": 3.0}
