"""Separate --master / --worker processes: workers refused, joining late, cut off for a while,
or stopped cleanly; the report says what happened and keeps every interval that arrived."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.ports import free_port
from tests.helpers.processes import wait_for
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records
from tests.integration.proxy import CuttableProxy

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@contextmanager
def processes():
    procs: list[subprocess.Popen] = []

    def start(*args: str, env: dict | None = None) -> subprocess.Popen:
        p = subprocess.Popen(locust_cmd(*args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **(env or {})})  # fmt: skip
        procs.append(p)
        return p

    try:
        yield start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def master_args(
    sim_url: str, report_dir, port: int, workers: int, seconds: int = 10, *extra: str
) -> list[str]:
    return ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--headless",
            "--expect-workers", str(workers), "-u", "8", "-r", "8", "-t", f"{seconds}s", "--stop-timeout", "5",
            "--host", sim_url, "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", *extra]  # fmt: skip


def worker_args(port: int) -> list[str]:
    return ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]


def test_worker_with_other_plugins_is_refused(tmp_path):
    try:
        importlib.metadata.distribution("loadkit-anthropic")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(
            "needs the example plugin installed (scripts/test.sh installs it) to make plugin sets differ"
        )
    report_dir, port = tmp_path / "r", free_port()
    with sim_process("--profile", "fast") as sim, processes() as start:
        master = start(*master_args(sim.url, report_dir, port, 2, 8))
        start(*worker_args(port))
        odd = start(*worker_args(port), env={"LOADKIT_LOAD_PLUGINS": "none"})
        _, odd_err = odd.communicate(timeout=60)
        _, err = master.communicate(timeout=90)
    assert "plugins differ from the master's" in odd_err
    report = check_conservation(report_dir)
    assert any("refused" in w and "plugins differ" in w for w in report["warnings"]), report["warnings"]
    assert sum(e["requests"] for e in report["engines"].values()) > 0, err[-2000:]


def test_late_worker_is_reported_and_counted(tmp_path):
    report_dir, port = tmp_path / "r", free_port()
    with sim_process("--profile", "fast") as sim, processes() as start:
        master = start(*master_args(sim.url, report_dir, port, 1, 12, "--enable-rebalancing"))
        start(*worker_args(port))
        time.sleep(5)
        start(*worker_args(port))
        _, err = master.communicate(timeout=90)
    assert master.returncode == 0, err[-3000:]
    report = check_conservation(report_dir)
    assert any("joined after the start" in w for w in report["warnings"]), report["warnings"]
    rows = raw_records(report_dir)
    assert len({r["worker"] for r in rows}) == 2


def test_link_cut_for_seconds_loses_nothing(tmp_path):
    report_dir, port = tmp_path / "r", free_port()
    with sim_process("--profile", "fast") as sim, processes() as start:
        master = start(*master_args(sim.url, report_dir, port, 1, 16))
        proxy = CuttableProxy(port)
        try:
            start(*worker_args(proxy.port))
            time.sleep(5)
            proxy.cut(4)
            _, err = master.communicate(timeout=120)
        finally:
            proxy.close()
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    # The worker's raw log and the master's report agree: the cut lost no interval.
    assert len(rows) == sum(e["requests"] for e in report["engines"].values()) > 20, err[-2000:]


def both_logged(report_dir, least: int) -> bool:
    logs = list(report_dir.glob("requests.worker*.jsonl")) if report_dir.is_dir() else []
    return len(logs) >= 2 and all(sum(1 for _ in log.open()) >= least for log in logs)


def test_worker_stopped_cleanly_keeps_its_data(tmp_path):
    report_dir, port = tmp_path / "r", free_port()
    with sim_process("--profile", "fast") as sim, processes() as start:
        master = start(*master_args(sim.url, report_dir, port, 2, 12))
        start(*worker_args(port))
        leaving = start(*worker_args(port))
        # Stopped once both workers have logged requests, not after a fixed time: on a loaded
        # machine a worker still importing at 6 s was stopped before it joined, and the master
        # then waited for a second worker that never came.
        wait_for("both workers' raw logs to hold 6 requests each", lambda: both_logged(report_dir, 6), 60)
        leaving.send_signal(signal.SIGTERM)
        leaving.wait(30)
        _, err = master.communicate(timeout=90)
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    by_worker = {w: sum(1 for r in rows if r["worker"] == w) for w in {r["worker"] for r in rows}}
    assert len(by_worker) == 2 and min(by_worker.values()) > 5, by_worker
    assert len(rows) == sum(e["requests"] for e in report["engines"].values()), err[-2000:]
    assert report["workers"], "the report lists the workers and what became of them"


def test_processes_without_a_master_port_runs_with_locust_s_default_port_taken(tmp_path):
    """--processes with no master port gets a free one (run/masterport.py). On Locust's fixed
    5557, taken (here by a socket that never answers), the master failed to bind with a
    traceback and its forked workers connected to whatever held the port."""
    blocker = socket.socket()
    try:
        blocker.bind(("", 5557))
        blocker.listen(1)
    except OSError:
        pass  # already taken by something else on the machine: the same condition
    report_dir = tmp_path / "r"
    try:
        with sim_process("--profile", "fast") as sim, processes() as start:
            run = start("--processes", "2", "--headless", "-u", "4", "-r", "4", "-t", "4s", "--stop-timeout", "5",
                        "--host", sim.url, "--scenario", str(SCENARIOS / "closed_small.toml"),
                        "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
            _, err = run.communicate(timeout=120)
    finally:
        blocker.close()
    assert run.returncode == 0, err[-3000:]
    assert "Address already in use" not in err and "2 workers connected" in err
    report = check_conservation(report_dir)
    assert report["valid"] and report["workers"]["count"] == 2 and report["workers"]["lost"] == 0
