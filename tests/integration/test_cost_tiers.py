"""SLO tiers and cost in real Locust sweeps against the simulator: each tier's counts and max
load recomputed here from the raw log, the cost from the report's throughput, `loadkit verify`
agreeing (and catching a tampered figure), one process and two."""

from __future__ import annotations

import json
import shutil

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIERS = {"tight": {"ttft_ms": 30, "tpot_ms": 20}, "loose": {"ttft_ms": 400, "tpot_ms": 100}}
PRICE, GPUS = 2.5, 2


def good(row: dict, slos: dict) -> bool | None:
    """The rule of docs/metrics.md, written again from the raw log's times."""
    if row["outcome"] == "cancelled":
        return None
    if row["outcome"] != "ok":
        return False
    values = {"ttft_ms": row["t_first_ns"] - row["t_send_ns"] if row["t_first_ns"] is not None else None}
    n = row["n_out"]
    values["tpot_ms"] = (
        (row["t_last_ns"] - row["t_first_ns"]) / (n - 1) if n and n >= 2 and row["t_last_ns"] else None
    )
    return all(values[k] is None or values[k] <= ms * 1e6 for k, ms in slos.items())


def sweep(tmp_path, processes, tiers_from="command line"):
    report_dir = tmp_path / "r"
    extra = ["--processes", processes] if processes else []
    tiers = [
        f"--slo-tier={name}:" + ",".join(f"{k}={v}" for k, v in slos.items()) for name, slos in TIERS.items()
    ]
    scenario = SCENARIOS / "sweep_closed.toml"
    if tiers_from == "scenario":  # every worker reads them from the file, none from the command line
        tables = "".join(
            f'\n[[slo_tiers]]\nname = "{name}"\n' + "".join(f"{k} = {v}\n" for k, v in slos.items())
            for name, slos in TIERS.items()
        )
        scenario = tmp_path / "sweep_tiers.toml"
        scenario.write_text((SCENARIOS / "sweep_closed.toml").read_text() + tables)
        tiers = []
    # max_num_seqs = 8: the cost model saturates at 8 concurrent sequences (test_arrivals.py).
    with sim_process("--profile", "default", "--max-num-seqs", "8") as sim:
        proc = run_locust(
            "--headless", "--host", sim.url, "--engine", "vllm", "--stop-timeout", "3", *extra,
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
            *tiers, "--gpu-hour-cost", str(PRICE), "--gpus", str(GPUS), timeout=240,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return report_dir, proc


@pytest.mark.parametrize(("processes", "tiers_from"), [(None, "command line"), ("2", "scenario")])
def test_tier_sweep_matches_the_raw_log(tmp_path, processes, tiers_from):
    report_dir, proc = sweep(tmp_path, processes, tiers_from)
    report = check_conservation(report_dir)  # every request once; loadkit verify agrees (tiers, cost too)
    rows = [r for r in raw_records(report_dir) if r["engine"] == "vllm"]
    section = report["slo_tiers"]
    assert section["attainment_target"] == 0.9
    tiers = {t["name"]: t for t in section["by_target"]["vllm"]["tiers"]}
    assert set(tiers) == {"run_slos", *TIERS}  # the run's own [slos] ttft_ms = 60 beside the two
    levels = {}
    for name, slos in TIERS.items():
        tier = tiers[name]
        verdicts = [good(r, slos) for r in rows]
        judged = sum(v is not None for v in verdicts)
        assert tier["whole_run"]["judged"] == judged
        assert tier["whole_run"]["good"] == sum(v is True for v in verdicts)
        best = None
        for stage in tier["stages"]:
            mine = [good(r, slos) for r in rows if r["stage"] == stage["stage"]]
            j, g = sum(v is not None for v in mine), sum(v is True for v in mine)
            assert (stage["judged"], stage["good"]) == (j, g), stage
            if j and g / j >= 0.9:
                best = stage
        assert (tier["max_load"] or {}).get("stage") == (best or {}).get("stage")
        levels[name] = (tier["max_load"] or {}).get("level") or 0
    # The tight tier fails first as the queue builds past 8 sequences; the loose one holds at 16.
    assert levels["tight"] < levels["loose"], levels
    assert levels["loose"] >= 8, levels
    # Cost: price × GPUs over the throughput the engine section shows.
    cost = report["cost"]["vllm"]
    engine = report["engines"]["vllm"]
    assert cost["cost_per_hour"] == PRICE * GPUS and cost["currency"] == "USD"
    ok_tokens = sum(r["n_out"] or 0 for r in rows if r["outcome"] == "ok")
    assert engine["output_tokens_per_s"] == pytest.approx(ok_tokens / engine["window_s"])
    assert cost["measured"]["cost_per_1m_output_tokens"] == pytest.approx(
        PRICE * GPUS * 1e6 / (engine["output_tokens_per_s"] * 3600)
    )
    loose = cost["tiers"]["loose"]["max_load"]
    assert loose["level"] == levels["loose"]
    assert loose["cost_per_1m_output_tokens"] == pytest.approx(
        PRICE * GPUS * 1e6 / (tiers["loose"]["max_load"]["output_tokens_per_s"] * 3600)
    )
    # The console says it too.
    assert "cost vllm: 5.00 USD/h" in proc.stderr + proc.stdout
    assert "tier loose [ttft_ms=400,tpot_ms=100] vllm:" in proc.stderr + proc.stdout


def test_verify_catches_a_tampered_tier_and_cost(tmp_path):
    report_dir, _ = sweep(tmp_path, None)
    from loadkit.verify import load_run, verify_run

    assert verify_run(load_run(report_dir)).ok
    for tamper, section in (
        (_tier_max, "slo_tiers"),
        (_tier_good, "slo_tiers"),
        (_cost, "cost"),
        (_stage_cost, "cost"),
    ):
        copy = tmp_path / f"t-{tamper.__name__}"
        shutil.copytree(report_dir, copy)
        report = json.loads((copy / "report.json").read_text())
        tamper(report)
        (copy / "report.json").write_text(json.dumps(report))
        verdict = verify_run(load_run(copy))
        # (a wrong max load also disagrees with the cost section's max-load stage)
        assert not verdict.ok and section in {d.section for d in verdict.disagreements}, verdict.disagreements


def _tiers(report):
    return {t["name"]: t for t in report["slo_tiers"]["by_target"]["vllm"]["tiers"]}


def _tier_max(report):
    """Claim the tight tier held one stage higher than it did."""
    tight = _tiers(report)["tight"]
    names = [s["stage"] for s in tight["stages"]]
    at = names.index(tight["max_load"]["stage"]) if tight["max_load"] else -1
    tight["max_load"] = dict(tight["stages"][at + 1])


def _tier_good(report):
    _tiers(report)["loose"]["whole_run"]["good"] += 1


def _cost(report):
    report["cost"]["vllm"]["measured"]["cost_per_1m_output_tokens"] *= 0.9


def _stage_cost(report):
    report["cost"]["vllm"]["stages"][-1]["cost_per_1m_requests"] *= 1.01
