"""A real run with --report-format llmd-br against the simulator: the llm-d Benchmark Report
it writes is read back as llm-d-benchmark reads it (YAML), passes the v0.2 JSON Schema and
carries the run's own figures."""

from __future__ import annotations

import pytest

from loadkit.report.llmd import schema_errors
from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, nearest_rank, raw_records, run_locust

pytestmark = pytest.mark.integration
yaml = pytest.importorskip("yaml")


def test_a_run_writes_a_valid_benchmark_report(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "3") as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "3s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", "--report-format", "llmd-br", "--scrape-interval", "0.5",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    assert report["manifest"]["report_formats"] == ["llmd-br"]
    path = report_dir / "benchmark_report_v0.2,_loadkit_vllm.yaml"
    assert f"llm-d Benchmark Report {path}" in proc.stdout
    document = yaml.safe_load(path.read_text())
    assert schema_errors(document) == []
    aggregate = document["results"]["request_performance"]["aggregate"]
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert aggregate["requests"]["total"] == len(rows) >= 10
    assert aggregate["requests"]["failures"] == len(rows) - len(ok) - aggregate["requests"]["incomplete"]
    # TTFT in seconds, nearest rank over the ok requests (within the histogram's 0.1 %).
    ttft_s = [(r["t_first_ns"] - r["t_send_ns"]) / 1e9 for r in ok]
    ttft = aggregate["latency"]["time_to_first_token"]
    assert ttft["units"] == "s"
    assert ttft["p50"] == pytest.approx(nearest_rank(ttft_s, 0.5), rel=2e-3)
    assert ttft["max"] == pytest.approx(max(ttft_s), rel=1e-6)
    load = document["scenario"]["load"]["standardized"]
    assert load["tool"] == "loadkit" and load["concurrency"] == 4
    assert document["scenario"]["stack"][0]["standardized"]["model"]["name"] == "sim-fast"
    # The simulator's /metrics, scraped every 0.5 s: the users' requests ran on the server.
    [observed] = document["results"]["observability"]["components"]
    assert observed["component_label"] == "vllm"
    running = observed["aggregate"]["running_requests"]
    assert running["units"] == "count" and 1 <= running["max"] <= 4
    assert 0 < observed["aggregate"]["kv_cache_usage"]["max"] <= 100


def test_no_benchmark_report_unless_asked(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "3") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "1s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "openai", "--scenario", str(SCENARIOS / "tiny_fixed.toml"),
            "--report-dir", str(report_dir),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (report_dir / "report.json").exists()
    assert list(report_dir.glob("benchmark_report*")) == []


def test_a_distributed_run_asked_through_the_environment_writes_it_on_the_master(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "5") as sim:
        proc = run_locust(
            "--headless", "--processes", "2", "-u", "4", "-r", "4", "-t", "3s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "openai", "--scenario", str(SCENARIOS / "tiny_fixed.toml"),
            "--report-dir", str(report_dir), env={"LOADKIT_REPORT_FORMAT": "llmd-br"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    [path] = report_dir.glob("benchmark_report_v0.2,_*.yaml")
    document = yaml.safe_load(path.read_text())
    assert schema_errors(document) == []
    assert document["scenario"]["load"]["standardized"]["parallelism"] == report["manifest"]["workers"] == 2
    total = document["results"]["request_performance"]["aggregate"]["requests"]["total"]
    assert total == report["engines"]["openai"]["requests"] > 0
