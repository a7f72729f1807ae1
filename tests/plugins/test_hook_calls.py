"""docs/hooks.md's "Runs:" line of every hook, checked against real hook calls: a test plugin
loaded through a real entry point records each call (hook, process, what it saw) during a
local headless run and a master + worker run against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.ports import free_port
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records
from tests.integration.test_distributed import master_args, processes, worker_args
from tests.plugins.hookrec import install

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PLUGIN = "loadkit-hookrec"  # the distribution name the plugin is known by


@pytest.fixture
def recorder(tmp_path, monkeypatch) -> Path:
    """Every process started from here on (simulator, Locust nodes) loads the plugin."""
    site = tmp_path / "site"
    site.mkdir()
    for key, value in install(site).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("LOADKIT_LOAD_PLUGINS", raising=False)
    return site / "calls.jsonl"


def calls(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def per_pid(rows: list[dict], hook: str) -> Counter:
    return Counter(r["pid"] for r in rows if r["hook"] == hook)


def run_args(url: str, report_dir: Path, seconds: int = 3) -> list[str]:
    return ["--headless", "-u", "2", "-r", "2", "-t", f"{seconds}s", "--host", url, "--engine", "auto",
            "--scenario", str(SCENARIOS / "closed_small.toml"), "--report-dir", str(report_dir), "--raw-log"]  # fmt: skip


def check_registration(rows: list[dict], nodes: list[int], sim_pid: int) -> None:
    """register_engines / add_arguments: once per Locust process, on every node;
    register_sim_protocols: once in the simulator, never on a Locust node."""
    for hook in ("loadkit_register_engines", "loadkit_add_arguments"):
        counts = per_pid(rows, hook)
        assert all(counts[pid] == 1 for pid in nodes), (hook, counts, nodes)
    assert per_pid(rows, "loadkit_register_sim_protocols") == Counter({sim_pid: 1})


def check_configure(rows: list[dict], nodes: list[int], senders: list[int]) -> None:
    """Every node configures (workers with the master's values) before its first request."""
    configure = [r for r in rows if r["hook"] == "loadkit_configure"]
    assert {r["pid"] for r in configure} >= set(nodes), (configure, nodes)
    # The worker was started without --scenario: it sees the master's.
    assert {r["scenario"] for r in configure} == {str(SCENARIOS / "closed_small.toml")}, configure
    for pid in senders:
        first_request = min(
            r["t"] for r in rows if r["hook"] == "loadkit_request_finished" and r["pid"] == pid
        )
        assert min(r["t"] for r in configure if r["pid"] == pid) < first_request


def check_requests(rows: list[dict], senders: list[int], report_dir: Path) -> None:
    """request_finished: on the nodes that sent, once per request, every request."""
    finished = [r for r in rows if r["hook"] == "loadkit_request_finished"]
    assert {r["pid"] for r in finished} <= set(senders)
    ids = [r["request_id"] for r in finished]
    assert len(ids) == len(set(ids)) > 0
    assert set(ids) == {r["request_id"] for r in raw_records(report_dir)}


def check_reports(rows: list[dict], owner: int, report: dict) -> None:
    """write_report: on the report's owner, after report.json exists, one final write;
    report_written: once, on the owner, after every write, with report.html already there."""
    writes = [r for r in rows if r["hook"] == "loadkit_write_report"]
    written = [r for r in rows if r["hook"] == "loadkit_report_written"]
    assert {r["pid"] for r in writes + written} == {owner}
    assert all(r["json"] for r in writes), writes
    assert [r["final"] for r in writes].count(True) == 1 and writes[-1]["final"] is True
    assert len(written) == 1 and written[0]["t"] > writes[-1]["t"]
    assert written[0]["files"] == ["report.html", "report.json", "stats.csv"]
    assert written[0]["valid"] is report["valid"] is True


def test_hook_calls_in_a_local_run(recorder, tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = subprocess.Popen(locust_cmd(*run_args(sim.url, report_dir)), cwd=REPO, env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-3000:]
    report = check_conservation(report_dir)
    rows = calls(recorder)
    local = proc.pid
    check_registration(rows, [local], sim.process.pid)
    # detect_engine: on the node that builds the targets, once per `auto` URL.
    assert per_pid(rows, "loadkit_detect_engine") == Counter({local: 1})
    check_configure(rows, [local], [local])
    check_requests(rows, [local], report_dir)
    check_reports(rows, local, report)


def test_hook_calls_in_a_distributed_run(recorder, tmp_path):
    report_dir, port = tmp_path / "r", free_port()
    with sim_process("--profile", "fast") as sim, processes() as start:
        args = master_args(sim.url, report_dir, port, 1, 4, "--engine", "auto")
        master = start(*args)
        worker = start(*worker_args(port))
        _, err = master.communicate(timeout=90)
        worker.communicate(timeout=30)
    assert master.returncode == 0, err[-3000:]
    report = check_conservation(report_dir)
    rows = calls(recorder)
    check_registration(rows, [master.pid, worker.pid], sim.process.pid)
    # The master detects and hands its finding to the workers: same engine and names everywhere.
    assert per_pid(rows, "loadkit_detect_engine") == Counter({master.pid: 1})
    check_configure(rows, [master.pid, worker.pid], [worker.pid])
    check_requests(rows, [worker.pid], report_dir)
    check_reports(rows, master.pid, report)


def test_failing_report_plugin_is_named_and_stops_no_builtin_writer(recorder, tmp_path, monkeypatch):
    monkeypatch.setenv("LOADKIT_HOOKREC_FAIL", "loadkit_write_report,loadkit_report_written")
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = subprocess.run(locust_cmd(*run_args(sim.url, report_dir, 2)), cwd=REPO, capture_output=True,
                              text=True, timeout=90)  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    for hook in ("loadkit_write_report", "loadkit_report_written"):
        reason = f"plugin {PLUGIN!r} raised RuntimeError('hookrec fails in {hook} on purpose') in {hook}"
        assert reason in report["invalid_reasons"], report["invalid_reasons"]
        assert reason in proc.stderr
    assert report["valid"] is False
    html = (report_dir / "report.html").read_text()
    assert "hookrec fails in loadkit_report_written on purpose" in html  # rewritten with the reason
    assert (report_dir / "stats.csv").is_file()
