"""deploy/kubernetes/'s pods run as processes here, with the manifests' own commands
(tests/helpers/kube.py): the headless Job with the worker Deployment's replicas, the web-UI
master ready for its probe, and a worker stopped as Kubernetes stops one (SIGTERM)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.kube import Pods, container, resource
from tests.helpers.ports import free_port
from tests.helpers.runs import check_conservation

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKERS = resource("Deployment", "loadkit-worker", "common")
JOB = resource("Job", "loadkit-master", "headless")
WEB_MASTER = resource("Deployment", "loadkit-master", "webui")


LOGS: dict[int, Path] = {}  # a started pod's pid -> the file of its output (stdout and stderr)


@contextmanager
def cluster(tmp_path, host: str):
    """Start pods (processes in their own session, like a pod's processes, their output in a
    file each, never a pipe left unread); kill what is left."""
    pods = Pods(tmp_path / "volumes", host)
    procs: list[subprocess.Popen[str]] = []

    def start(name: str, workload: dict, *prefix: str, **env: str) -> subprocess.Popen[str]:
        argv, values = pods.command(name, workload, **env)
        log = tmp_path / f"{name}.log"
        with log.open("w") as out:
            p = subprocess.Popen([*prefix, *argv], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, **values}, start_new_session=True)  # fmt: skip
        LOGS[p.pid] = log
        procs.append(p)
        return p

    try:
        yield pods, start
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


def output(proc: subprocess.Popen[str]) -> str:
    return LOGS[proc.pid].read_text(errors="replace")


def wait_for(proc: subprocess.Popen[str], texts: tuple[str, ...], timeout: float) -> None:
    """Until the pod's output says one of ``texts``; the test fails with that output if not."""
    deadline = time.monotonic() + timeout
    while not any(text in output(proc) for text in texts):
        if time.monotonic() > deadline or proc.poll() is not None:
            pytest.fail(f"none of {texts} within {timeout} s:\n{output(proc)[-4000:]}")
        time.sleep(0.2)


# What the master's Locust logs once the users run (the second when a worker's spawn report is late).
SPAWNED = ("All users spawned", "Spawning is complete")


def finish(proc: subprocess.Popen[str], timeout: float, what: str) -> str:
    """Its output once it ends; it killed and the test failed with its output's end if it does
    not end in time."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        pytest.fail(f"{what} did not end within {timeout} s:\n{output(proc)[-4000:]}")
    return output(proc)


def report_dir(pods: Pods, workload: dict) -> Path:
    """Where the master's --report-dir (on its report volume) is on this machine."""
    args = container(workload)["args"]
    given = args[args.index("--report-dir") + 1]
    for mount, folder in pods.paths("master", workload).items():
        if given.startswith(mount + "/"):
            return folder / given[len(mount) + 1 :]
    raise AssertionError(f"--report-dir {given} is on no volume of {workload['metadata']['name']}")


def start_workers(start, port: int) -> list[subprocess.Popen[str]]:
    return [start(f"worker-{i}", WORKERS, MASTER_HOST="127.0.0.1", MASTER_PORT=str(port))
            for i in range(WORKERS["spec"]["replicas"])]  # fmt: skip


def test_headless_job_with_the_worker_deployment(tmp_path):
    port, replicas = free_port(), WORKERS["spec"]["replicas"]
    with sim_process("--profile", "fast") as sim, cluster(tmp_path, sim.url) as (pods, start):
        start_workers(start, port)
        master = start("master", JOB, MASTER_PORT=str(port), WORKERS=str(replicas), USERS="4", SPAWN_RATE="4",
                       RUN_TIME="6s")  # fmt: skip
        err = finish(master, 120, "the headless master")
    assert master.returncode == 0, err[-3000:]
    report = check_conservation(report_dir(pods, JOB))
    assert report["valid"], report.get("warnings")
    assert report["workers"]["count"] == replicas and report["workers"]["lost"] == 0, report["workers"]
    assert sum(e["requests"] for e in report["engines"].values()) > 10


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


def test_web_ui_master_is_ready_with_its_workers(tmp_path):
    port, web = free_port(), free_port()
    probe = container(WEB_MASTER)["readinessProbe"]["httpGet"]
    with sim_process("--profile", "fast") as sim, cluster(tmp_path, sim.url) as (pods, start):
        master = start("master", WEB_MASTER, MASTER_PORT=str(port), WEB_PORT=str(web))
        start_workers(start, port)
        deadline, status, workers = time.monotonic() + 60, None, []
        while time.monotonic() < deadline and not (
            status == 200 and len(workers) == WORKERS["spec"]["replicas"]
        ):
            time.sleep(1)
            try:
                status, _ = get(f"http://127.0.0.1:{web}{probe['path']}")
                workers = json.loads(get(f"http://127.0.0.1:{web}/stats/requests")[1]).get("workers", [])
            except OSError:
                continue
        assert status == 200 and len(workers) == WORKERS["spec"]["replicas"], (status, workers)
        master.send_signal(signal.SIGTERM)  # a pod's stop
        err = finish(master, 60, "the web-UI master, on SIGTERM")
    assert master.returncode == 0, err[-3000:]


def test_a_worker_pod_stopped_by_sigterm_sends_its_final_snapshot(tmp_path):
    """Kubernetes stops a pod with SIGTERM to its first process, `loadkit run`. Before it passed
    the signal on, `loadkit run` died and left its Locust worker running on, unstopped."""
    port = free_port()
    with sim_process("--profile", "fast") as sim, cluster(tmp_path, sim.url) as (pods, start):
        workers = start_workers(start, port)
        master = start("master", JOB, MASTER_PORT=str(port), WORKERS=str(len(workers)), USERS="4",
                       SPAWN_RATE="4", RUN_TIME="14s")  # fmt: skip
        wait_for(master, SPAWNED, 60)  # mid-run, on a slow machine too
        time.sleep(3)
        leaving = workers[0]
        leaving.send_signal(signal.SIGTERM)
        leaving_err = finish(leaving, 40, "the worker, on SIGTERM")
        try:
            os.killpg(leaving.pid, 0)
            left_running = True
        except ProcessLookupError:
            left_running = False
        err = finish(master, 120, "the headless master")
    assert not left_running, "the pod's Locust worker outlived its `loadkit run`"
    assert leaving.returncode == 0, leaving_err[-3000:]
    report = check_conservation(report_dir(pods, JOB))
    nodes = report["workers"]["nodes"]
    assert report["workers"]["lost"] == 0 and all(n["status"] == "final" for n in nodes), (nodes, err[-2000:])


def pid_namespace_prefix() -> tuple[str, ...]:
    """`unshare --pid --fork`: the command runs as PID 1 of a new PID namespace, as a container's
    first process does. Skipped only where this machine cannot make one."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) on this machine: cannot run a process as PID 1 of a PID namespace")
    probe = subprocess.run(
        ["unshare", "--pid", "--fork", "sh", "-c", "echo $$"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"this machine refuses a new PID namespace: {probe.stderr.strip()}")
    assert probe.stdout.strip() == "1", probe.stdout
    return ("unshare", "--pid", "--fork")


def forked_child(parent: int, timeout: float = 10) -> int:
    """The process unshare forked (PID 1 inside its namespace), by its PID out here."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError(f"unshare ({parent}) forked nothing in {timeout} s")


def test_worker_and_master_as_pid_1_stop_on_sigterm_and_keep_every_snapshot(tmp_path):
    """A container's first process is PID 1 of its PID namespace, and the kernel drops a signal
    sent there from outside unless the process handles it. `loadkit run` handled no SIGTERM:
    as a pod it ran on through `kubectl delete` until the grace period's SIGKILL."""
    prefix, port = pid_namespace_prefix(), free_port()
    with sim_process("--profile", "fast") as sim, cluster(tmp_path, sim.url) as (pods, start):
        leaving = start("worker-0", WORKERS, *prefix, MASTER_HOST="127.0.0.1", MASTER_PORT=str(port))
        start("worker-1", WORKERS, MASTER_HOST="127.0.0.1", MASTER_PORT=str(port))
        master = start("master", JOB, *prefix, MASTER_PORT=str(port), WORKERS="2", USERS="4", SPAWN_RATE="4",
                       RUN_TIME="60s")  # fmt: skip
        wait_for(master, SPAWNED, 60)
        time.sleep(3)
        os.kill(forked_child(leaving.pid), signal.SIGTERM)
        leaving_err = finish(leaving, 20, "the worker, PID 1 of its namespace, on SIGTERM")
        os.kill(forked_child(master.pid), signal.SIGTERM)
        err = finish(master, 40, "the headless master, PID 1 of its namespace, on SIGTERM")
    assert leaving.returncode == 0, leaving_err[-3000:]
    report = check_conservation(report_dir(pods, JOB))
    nodes = report["workers"]["nodes"]
    assert report["workers"]["lost"] == 0 and len(nodes) == 2, (nodes, err[-2000:])
    assert all(n["status"] == "final" for n in nodes), nodes
