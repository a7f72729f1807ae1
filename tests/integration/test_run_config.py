"""One run configuration in real runs (issue 22): the options are only read, each process
configures once per start, and the four bugs that followed from the old two-way options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import (
    REPO,
    SCENARIOS,
    check_conservation,
    load_report,
    nearest_rank,
    raw_records,
    run_locust,
)

SPY = Path(__file__).resolve().parent / "locustfiles" / "options_spy.py"
NS = 1e9


def run_spied(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    spy_dir = tmp_path / "spy"
    spy_dir.mkdir()
    env = {**os.environ, "LOADKIT_TEST_SPY_DIR": str(spy_dir)}
    cmd = [sys.executable, "-m", "locust", "-f", str(SPY), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    return proc, [json.loads(p.read_text()) for p in sorted(spy_dir.glob("*.json"))]


@pytest.mark.parametrize("processes", [None, "2"])
def test_setup_leaves_the_options_alone_and_configures_once_per_process(tmp_path, processes):
    """vars(parsed_options) before loadkit's init equals it after the run, on every node; the
    scenario is loaded and the servers probed once per process (it was 2 on local and master)."""
    report_dir = tmp_path / "r"
    scenario = tmp_path / "slo.toml"
    scenario.write_text((SCENARIOS / "open_poisson.toml").read_text() + "\n[slos]\nttft_ms = 5000\n")
    with sim_process("--profile", "fast") as sim:
        proc, spied = run_spied(
            tmp_path, "--headless", "-u", "4", "-r", "1", "-t", "3s", "--stop-timeout", "3", "--host", sim.url,
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
            *(["--processes", processes] if processes else []),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    roles = sorted(s["role"] for s in spied)
    assert roles == (["MasterRunner", "WorkerRunner", "WorkerRunner"] if processes else ["LocalRunner"])
    for node in spied:
        # Locust's own spawn message copies the master's --expect-workers into each worker's options.
        changed = {k: v for k, v in node["changed"].items() if not (k == "expect_workers" and processes)}
        assert changed == {}, node
        assert node["configured"] == 1, node
        # The scenario's SLOs reached every node through the run configuration, not the options.
        assert (node["slos"], node["slo_source"]) == (["ttft_ms=5000"], "scenario"), node
    report = check_conservation(report_dir)
    assert report["manifest"]["slos_from"] == "scenario"
    assert report["engines"] and all(e["requests"] > 0 for e in report["engines"].values())


def test_warmup_then_run_time_measures_the_rest(tmp_path):
    """--warmup 3 -t 15s, a scenario without stages: 3 s of warm-up, then ~12 s measured (the
    run used to end after the warm-up: 0 measured requests, valid, exit 0)."""
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "--warmup", "3", "-t", "15s", "--stop-timeout", "3",
            "--host", sim.url, "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert rows and {r["stage"] for r in rows} == {"main"}
    span_s = (max(r["t_send_ns"] for r in rows) - min(r["t_send_ns"] for r in rows)) / NS
    assert 10.5 < span_s < 12.5, span_s
    stages = report["stages"][next(iter(report["stages"]))]["stages"]
    assert [s["name"] for s in stages] == ["warmup", "main"]
    assert stages[0]["stats"]["requests"] > 0 and stages[1]["duration_s"] == 12.0
    assert report["valid"] is True


def test_warmup_as_long_as_the_run_is_one_clear_error(tmp_path):
    proc = run_locust("--headless", "-u", "1", "--warmup", "5", "-t", "5s", "--host", "http://127.0.0.1:9",
                      "--engine", "vllm", "--report-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 2 and "--warmup 5 leaves nothing to measure in -t 5s" in proc.stderr
    assert "Traceback" not in proc.stderr


SPARSE = """schema = "loadkit.scenario/1"
name = "sparse"
seed = 2
[arrival]
model = "constant"
rate = 2.0
[prompt]
tokenizer = "approx"
shape = "prompt"
[[parts]]
name = "p"
input = { dist = "fixed", value = 32 }
output = { dist = "fixed", value = 4 }
"""


def test_open_loop_sends_nothing_after_the_run_time(tmp_path):
    """8 senders for 2 req/s: each waits for a slot up to 4 s ahead. With --stop-timeout 6 they
    used to wake after -t and send; now no request starts after -t (in-flight ones finish)."""
    scenario = tmp_path / "sparse.toml"
    scenario.write_text(SPARSE)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "8", "-r", "8", "-t", "4s", "--stop-timeout", "6", "--host", sim.url,
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    t0 = min(r["t_sched_ns"] for r in rows)  # the schedule's first slot: offset 0
    late = [(r["t_send_ns"] - t0) / NS for r in rows if r["t_send_ns"] - t0 > 4.25 * NS]
    assert not late, f"sent after -t: {late}"
    assert 6 <= len(rows) <= 9, len(rows)  # 2/s for 4 s
    assert report["conservation"]["dropped"] <= 1


LONG = (
    SPARSE.replace('name = "sparse"', 'name = "long-prompts"')
    .replace("rate = 2.0", "rate = 8.0")
    .replace("value = 32", "value = 7000")
)  # the simulator's context is 8192


def test_schedule_lag_in_the_report_is_the_raw_logs(tmp_path):
    """One definition, t_send − t_sched at the write: with long prompts the report's lag used to
    be taken before the prompt was built (Mooncake replay: report p99 36.9 ms, raw log 48.6 ms)."""
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "4s", "--stop-timeout", "5", "--host", sim.url,
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    lags_ms = [max(0, r["t_send_ns"] - r["t_sched_ns"]) / 1e6 for r in rows]
    schedule = next(iter(report["manifest"]["schedule"].values()))
    assert schedule["sent"] == len(rows) >= 20
    for key, q in (("lag_p50_ms", 0.5), ("lag_p99_ms", 0.99)):
        assert schedule[key] == pytest.approx(nearest_rank(lags_ms, q), rel=0.01, abs=0.01), key
    assert schedule["lag_max_ms"] == pytest.approx(max(lags_ms), rel=0.01, abs=0.01)


def test_a_run_with_no_measured_request_is_never_valid(tmp_path):
    """--max-requests 2 spent inside a 3 s warm-up: nothing is measured, so the run is not
    valid (exit 3), whatever else went right."""
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "1", "-r", "1", "--warmup", "3", "-t", "10s", "--max-requests", "2",
            "--stop-timeout", "3", "--host", sim.url, "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    report = load_report(report_dir)  # nothing measured: check_conservation has nothing to hold
    assert raw_records(report_dir) == [] and report["conservation"]["sent"] == 0 and not report["engines"]
    assert report["valid"] is False and proc.returncode == 3, (report["invalid_reasons"], proc.stderr[-2000:])
