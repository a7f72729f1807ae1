"""Real `locust --headless` runs against the simulator: truth, percentiles, conservation."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import (
    SCENARIOS,
    check_conservation,
    check_percentiles_match_raw,
    raw_records,
    run_locust,
    truth_for,
)

pytestmark = pytest.mark.integration


def test_headless_run_measures_what_the_server_sent(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "3") as sim:
        proc = run_locust(
            "--headless", "-u", "6", "-r", "6", "-t", "6s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "openai",
            "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
        )  # fmt: skip
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) >= 20 and len(ok) >= 0.9 * len(rows)
    assert check_percentiles_match_raw(report, rows) >= 6
    # Every ok request: the server's own record agrees on tokens and on first-token timing.
    lateness = []
    for r in ok:
        t = truth[r["request_id"]]
        assert r["n_out"] == t["completion_tokens"] and r["n_out_source"] == "usage"
        assert r["n_in"] == t["prompt_tokens"]
        lateness.append((r["t_first_ns"] - t["t_token_ns"][0]) / 1e6)
    assert min(lateness) >= 0, "client saw a token before the server wrote it"
    # --raw-log-events: every token event, each seen at or after the server wrote it.
    for r in ok:
        written = truth[r["request_id"]]["t_token_ns"]
        assert len(r["event_t_ns"]) == r["n_events"] == len(written) == len(r["event_tokens"])
        assert all(seen >= sent for seen, sent in zip(r["event_t_ns"], written, strict=True))
        assert sum(r["event_tokens"]) == r["n_out"]
    lateness.sort()
    assert lateness[len(lateness) // 2] < 5.0, lateness
    # The self-check watched this process's reads: stamped by the kernel, and judged.
    health = report["manifest"]["client_selfcheck"]
    assert health["node"] == "local" and health["reads"] >= len(ok)
    assert health["kernel_stamped_pct"] > 50 and "max_late_read_pct" in health
    # The console shows the per-engine table and where the reports are.
    assert "TTFT" in proc.stderr + proc.stdout
    assert str(report_dir) in proc.stderr + proc.stdout


def test_processes_2_merges_workers_exactly(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "4") as sim:
        proc = run_locust(
            "--headless", "--processes", "2", "-u", "8", "-r", "8", "-t", "8s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert len({r["worker"] for r in rows}) == 2, "both workers sent traffic"
    assert len(list(report_dir.glob("requests.worker*.jsonl"))) == 2
    assert check_percentiles_match_raw(report, rows) >= 6


def test_two_targets_same_workload_kept_apart(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--serve", "openai:0:profile=fast", "--serve", "openai:0:profile=big") as sim:
        fast, big = sim.urls
        proc = run_locust(
            "--headless", "-u", "8", "-r", "8", "-t", "8s", "--stop-timeout", "10",
            "--target", f"fast={fast}", "--target", f"big={big},engine=vllm",
            "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    assert set(report["engines"]) == {"fast", "big"}
    # The big profile's decode step is ~5x slower: it shows in TPOT.
    assert report["engines"]["big"]["tpot_ms"]["p50"] > 3 * report["engines"]["fast"]["tpot_ms"]["p50"]
    rows = raw_records(report_dir)
    adapters = {r["engine"]: r["adapter"] for r in rows}
    assert adapters == {"fast": "openai", "big": "vllm"}
    # Same workload to both: the first requests each target got have the same target lengths.
    firsts = {e: [r["n_in_target"] for r in rows if r["engine"] == e][:3] for e in ("fast", "big")}
    assert set(firsts["fast"]) & set(firsts["big"])


def test_bad_engine_name_is_one_clear_error(tmp_path):
    proc = run_locust("--headless", "-t", "2s", "--host", "http://127.0.0.1:9", "--engine", "nosuch",
                      "--report-dir", str(tmp_path), timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert "unknown engine 'nosuch'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unreachable_host_is_one_clear_error(tmp_path):
    proc = run_locust("--headless", "-t", "2s", "--host", "http://127.0.0.1:9", "--report-dir", str(tmp_path),
                      timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert "unreachable" in proc.stderr and "Traceback" not in proc.stderr


def test_unreadable_scenario_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = "loadkit.scenario/1"\nseed = "x"\n')
    with sim_process("--profile", "fast") as sim:
        for scenario in (str(bad), str(tmp_path / "missing.toml")):
            proc = run_locust("--headless", "-t", "2s", "--host", sim.url, "--scenario", scenario,
                              "--report-dir", str(tmp_path), timeout=60)  # fmt: skip
            assert proc.returncode == 2, proc.stderr[-2000:]
            assert "Traceback" not in proc.stderr
            assert scenario.split("/")[-1] in proc.stderr
