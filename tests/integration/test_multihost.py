"""A master and three workers on four "hosts" of this machine (network, mount and UTS namespaces
of their own: tests/integration/netns.py), run with deploy/kubernetes/'s pod commands
(tests/helpers/kube.py). No report directory is shared: each worker writes its raw log on its
own host, where the master has its directory, and ships it to the master (docs/distributed.md,
"Workers on other hosts"). The master's directory then holds what a one-host run of the same
seeds holds (raw logs, and report.json's counts: outcomes, tokens, requests per engine, label and
class, conservation), `loadkit verify` agrees with it, and a worker killed mid-run leaves its
prefix while every request the report counts is counted once.

Skipped without root or iproute2 unless LOADKIT_REQUIRE_NETNS=1 (scripts/test.sh), then failed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.kube import Pods, resource
from tests.helpers.ports import free_port
from tests.helpers.runs import check_conservation, load_report, raw_records
from tests.integration.netns import hosts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKERS = resource("Deployment", "loadkit-worker", "common")
JOB = resource("Job", "loadkit-master", "headless")
N_WORKERS, PORT, SIM_PORT = 3, 5557, 8000
# The ConfigMap's scenario, edited as docs/kubernetes.md says one edits it: a fixed number of
# open-loop arrivals (seeded), all due well within the run, so two runs schedule the same requests.
SCENARIO = """schema = "loadkit.scenario/1"
name = "multihost"
seed = 17
duration_s = 60
max_requests = 90

[arrival]
model = "poisson"
rate = 20.0

[prompt]
tokenizer = "approx"
shape = "prompt"

[[parts]]
name = "p"
input = { dist = "uniform", low = 16, high = 64 }
output = { dist = "fixed", value = 8 }
"""
JOB_ENV = {"WORKERS": str(N_WORKERS), "USERS": "12", "SPAWN_RATE": "12", "RUN_TIME": "10s"}


def configure(pods: Pods) -> None:
    """The ConfigMap's files with the scenario above and the raw log on (pods read --config)."""
    pods.command("master", JOB)  # writes the ConfigMap's files out
    folder = pods.mounts["configmap-loadkit-config"]
    (folder / "scenario.toml").write_text(SCENARIO)
    conf = folder / "locust.conf"
    conf.write_text(conf.read_text() + "raw-log = true\n")


@contextmanager
def started(tmp_path: Path):
    procs: list[subprocess.Popen[str]] = []
    tmp_path.mkdir(parents=True, exist_ok=True)

    def start(name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        with (tmp_path / f"{name}.log").open("w") as out:
            p = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, **env}, start_new_session=True)  # fmt: skip
        procs.append(p)
        return p

    try:
        yield start
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


def log_of(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text(errors="replace")


def finish(proc: subprocess.Popen[str], tmp_path: Path, name: str, timeout: float = 120) -> None:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} did not end within {timeout} s:\n{log_of(tmp_path, name)[-4000:]}")


def wait_for_text(tmp_path: Path, name: str, texts: tuple[str, ...], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(t in log_of(tmp_path, name) for t in texts):
        if time.monotonic() > deadline:
            pytest.fail(f"none of {texts} within {timeout} s:\n{log_of(tmp_path, name)[-4000:]}")
        time.sleep(0.2)


def one_host_run(tmp_path: Path) -> Path:
    """The same pods, seeds and scenario, every process on loopback sharing one directory."""
    port = free_port()
    with sim_process("--profile", "fast") as sim, started(tmp_path) as start:
        pods = Pods(tmp_path / "volumes", sim.url)
        configure(pods)
        for i in range(N_WORKERS):
            start(
                f"worker-{i}",
                *pods.command(f"worker-{i}", WORKERS, MASTER_HOST="127.0.0.1", MASTER_PORT=str(port)),
            )
        master = start("master", *pods.command("master", JOB, MASTER_PORT=str(port), **JOB_ENV))
        finish(master, tmp_path, "master")
    assert master.returncode == 0, log_of(tmp_path, "master")[-3000:]
    return pods.mounts["pvc-loadkit-reports"] / "run"


@contextmanager
def cluster(tmp_path: Path, kill_worker_after_s: float | None = None, restart_killed: bool = False,
            run_time: str = JOB_ENV["RUN_TIME"]):  # fmt: skip
    """Master, simulator and workers each on a host of their own; yields (master's report
    directory, the workers' own report volumes, the master's process). ``restart_killed``: the
    killed worker's container starts again on its host, its volume kept (a pod's restart)."""
    with (
        hosts("master", "sim", *(f"worker-{i}" for i in range(N_WORKERS))) as net,
        started(tmp_path) as start,
    ):
        sim_url = f"http://{net.addresses['sim']}:{SIM_PORT}"
        sim = start("sim", [*net.prefix("sim"), sys.executable, "-m", "loadkit.sim", "--host", net.addresses["sim"],
                            "--port", str(SIM_PORT), "--profile", "fast"], {})  # fmt: skip
        wait_for_text(tmp_path, "sim", (sim_url,), 30)
        pods = Pods(tmp_path / "volumes", sim_url)
        configure(pods)
        master_volume = pods.mounts["pvc-loadkit-reports"]
        own: list[Path] = []
        workers, commands = [], []
        for i in range(N_WORKERS):
            argv, env = pods.command(
                f"worker-{i}", WORKERS, MASTER_HOST=net.addresses["master"], MASTER_PORT=str(PORT)
            )
            mine = pods.mounts[f"worker-{i}-reports"]
            own.append(mine)
            # The worker sees its own volume where the master has its: the path the master
            # names is there, on another filesystem.
            commands.append(([*net.prefix(f"worker-{i}", ((str(mine), str(master_volume)),)), *argv], env))
            workers.append(start(f"worker-{i}", *commands[-1]))
        argv, env = pods.command("master", JOB, MASTER_PORT=str(PORT), **{**JOB_ENV, "RUN_TIME": run_time})
        master = start("master", [*net.prefix("master"), *argv], env)
        if kill_worker_after_s is not None:
            wait_for_text(tmp_path, "master", ("All users spawned", "Spawning is complete"), 60)
            time.sleep(kill_worker_after_s)
            if restart_killed:  # cut off the master first: what it writes meanwhile does not arrive
                net.block("worker-0", "master", blocked=True)
                time.sleep(2.5)
            os.killpg(workers[0].pid, signal.SIGKILL)  # `loadkit run` and its Locust worker
            if restart_killed:
                workers[0].wait(10)
                net.reset("worker-0", "master")  # its unsent chunks die with it
                net.block("worker-0", "master", blocked=False)
                start("worker-0-again", *commands[0])
        finish(master, tmp_path, "master", 180)
        assert sim.poll() is None, log_of(tmp_path, "sim")[-2000:]
        yield master_volume / "run", own, master


def lengths(rows: list[dict]) -> list[int]:
    return sorted(r["n_in_target"] for r in rows)


# report.json's counts that the seeds fix, whatever the hosts and timing: outcomes, tokens, and
# requests per engine, label and user class (not times, rates, windows or the drop count).
COUNTS = ("requests", "ok", "failures", "cancelled", "outcomes", "output_tokens", "output_tokens_all_outcomes",
          "input_tokens", "cached_tokens", "stream_ends", "n_out_sources")  # fmt: skip
LENGTHS = ("input_target", "input_server", "output_asked", "output_server")


def deterministic(report: dict) -> dict:
    """The parts of report.json two runs of the same seeds must agree on exactly."""

    def counts(section: dict) -> dict:
        return {k: section[k] for k in COUNTS if k in section}

    cons = report["conservation"]
    return {
        "conservation": {
            k: cons[k] for k in ("sent", "outcomes_total", "in_flight", "lost_in_flight", "holds")
        },
        "engines": {
            name: {**counts(e), "labels": {label: counts(g) for label, g in e["labels"].items()}}
            for name, e in report["engines"].items()
        },
        "user_classes": {name: counts(c) for name, c in report["user_classes"].items()},
        "lengths": {
            target: {k: t.get(k) for k in LENGTHS} for target, t in report["lengths"]["by_target"].items()
        },
    }


def test_three_worker_hosts_ship_what_one_host_writes(tmp_path):
    single = one_host_run(tmp_path / "one")
    with cluster(tmp_path / "many") as (report_dir, own, master):
        assert master.returncode == 0, log_of(tmp_path / "many", "master")[-3000:]
        report = check_conservation(report_dir)  # raw log = report.json, and `verify`'s oracle agrees
        expected = load_report(single)
        # The same 90 seeded requests sent and accounted for once each. An open-loop slot that
        # came due with every user busy is dropped (and counted) on either run, as timing falls.
        ours, theirs = report["conservation"], expected["conservation"]
        for cons in (ours, theirs):
            assert cons["holds"] and cons["sent"] == cons["outcomes_total"] == 90, cons
            assert cons["scheduled"] == cons["sent"] + cons["dropped"] and cons["in_flight"] == 0, cons
        mine, one = deterministic(report), deterministic(expected)
        assert mine == one, json.dumps({"three hosts": mine, "one host": one}, indent=1)[-4000:]
        assert mine["engines"]["vllm"]["outcomes"] == {"ok": 90}, mine  # the counts are not vacuous
        rows, rows_one = raw_records(report_dir), raw_records(single)
        assert len(rows) == len(rows_one) == 90
        assert lengths(rows) == lengths(rows_one)  # the same seeded requests
        assert Counter(r["worker"] for r in rows) == Counter(r["worker"] for r in rows_one)
        # Shipped byte for byte: the master's copy is each worker's own file.
        for mine in own:
            (written,) = (mine / "run").glob("requests.worker*.jsonl")
            assert written.read_bytes() == (report_dir / written.name).read_bytes(), written.name
        assert not list(report_dir.glob(".loadkit-share-*")), "the workers' tokens are not left behind"
        manifest = report["manifest"]
        shipping = manifest["raw_log_shipping"]
        assert sorted(shipping) == [f"worker{i}" for i in range(N_WORKERS)]
        for entry in shipping.values():
            assert entry["mode"] == "shipped" and entry["complete"], entry
            assert (
                entry["lines_received"] == entry["worker_lines"]
                and entry["bytes_received"] == entry["worker_bytes"]
            )
        for clock in manifest["worker_clocks"].values():
            # One kernel's clock for every "host": the offset is within the round trip.
            assert clock["samples"] >= 3 and abs(clock["offset_ms"]) <= clock["rtt_ms"] / 2 + 1, clock
            assert clock["applied_ms"] == 0, clock  # within its uncertainty: no correction
        # The one-host run shares its directory: nothing shipped, and the report says so.
        assert all(
            e["mode"].startswith("shared")
            for e in load_report(single)["manifest"]["raw_log_shipping"].values()
        )
        verify = subprocess.run([str(Path(sys.executable).parent / "loadkit"), "verify", str(report_dir)],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-2000:]


def test_a_worker_killed_mid_run_leaves_its_shipped_prefix(tmp_path):
    with cluster(tmp_path, kill_worker_after_s=2.5) as (report_dir, own, master):
        report = json.loads((report_dir / "report.json").read_text())
        assert report["workers"]["lost"] == 1, report["workers"]
        (killed,) = (own[0] / "run").glob("requests.worker*.jsonl")  # Locust's index, not the pod's
        index = killed.name.removeprefix("requests.worker").removesuffix(".jsonl")
        shipped = (report_dir / killed.name).read_bytes()
        # A prefix of whole lines of what the worker wrote before it died.
        assert shipped and shipped.endswith(b"\n") and killed.read_bytes().startswith(shipped)
        entry = report["manifest"]["raw_log_shipping"][f"worker{index}"]
        assert entry["lines_received"] == shipped.count(b"\n") and entry["bytes_received"] == len(shipped)
        # The report says what arrived, and what the worker's last snapshot (report.json's
        # figures) counted: lines it shipped after that snapshot arrive too.
        assert entry["worker_lost"] and entry["worker_lines"] is not None, entry
        warning = f"worker {index} was lost: the master holds the first {entry['lines_received']} lines"
        assert any(w.startswith(warning) for w in report["warnings"]), report["warnings"]
        counted = next(n for n in report["workers"]["nodes"] if n["index"] == int(index))
        assert counted["status"] == "lost", counted
        assert any(r.startswith(f"worker {index} lost") for r in report["invalid_reasons"]), report[
            "invalid_reasons"
        ]
        # Conservation: every scheduled request is sent, dropped or in flight at the end, and
        # the only ones in flight are those the dead worker had at its last snapshot (lost).
        cons = report["conservation"]
        assert cons["holds"], cons
        assert cons["scheduled"] == cons["sent"] + cons["dropped"] + cons["in_flight"], cons
        assert cons["in_flight"] == cons["lost_in_flight"] >= 0, cons
        engines = report["engines"]
        assert cons["sent"] == cons["outcomes_total"] == sum(e["requests"] for e in engines.values()), cons
        # ... and each sent request counted once: the live workers' logs and the first lines of
        # the dead one's, as many as its last snapshot counted, are report.json's requests.
        rows = [json.loads(line) for line in shipped.splitlines()[: entry["worker_lines"]]]
        for mine in own[1:]:
            (written,) = (mine / "run").glob("requests.worker*.jsonl")
            rows += [json.loads(line) for line in (report_dir / written.name).read_text().splitlines()]
        assert len(rows) == cons["sent"], (len(rows), cons)
        every = raw_records(report_dir)  # the dead worker's later lines too: still no id twice
        assert len({r["request_id"] for r in every}) == len(every) >= len(rows)
        for name, section in engines.items():
            outcomes = Counter(r["outcome"] for r in rows if r["engine"] == name)
            assert outcomes == {k: v for k, v in section["outcomes"].items() if v}, (name, outcomes)
            assert (
                sum(r["n_out"] or 0 for r in rows if r["engine"] == name)
                == section["output_tokens_all_outcomes"]
            )
        # The lines it shipped after that snapshot are the requests report.json does not count.
        assert entry["lines_received"] - entry["worker_lines"] == len(every) - len(rows)
        # The others shipped everything.
        for mine in own[1:]:
            (written,) = (mine / "run").glob("requests.worker*.jsonl")
            assert written.read_bytes() == (report_dir / written.name).read_bytes(), written.name
            assert report["manifest"]["raw_log_shipping"][written.name[len("requests.") : -len(".jsonl")]][
                "complete"
            ]


def test_a_killed_worker_restarted_on_its_host_ships_the_rest_of_its_log(tmp_path):
    """A worker cut off from the others, then killed, its pod's container restarted with its
    volume kept: the new process asks the master which lost workers said hello from its host,
    finds that log on its disk and ships the rest from the offset the master holds (the lines
    written while cut off), so the master's copy is the dead worker's whole file."""
    # The master marks the worker lost when its heartbeats stop (seconds), and only then offers
    # its log: the run lasts long enough for that.
    with cluster(tmp_path, kill_worker_after_s=2.5, restart_killed=True, run_time="25s") as (
        report_dir,
        own,
        master,
    ):
        report = json.loads((report_dir / "report.json").read_text())
        assert report["workers"]["lost"] == 1, report["workers"]
        (index,) = [n["index"] for n in report["workers"]["nodes"] if n["status"] == "lost"]
        killed = own[0] / "run" / f"requests.worker{index}.jsonl"
        assert (report_dir / killed.name).read_bytes() == killed.read_bytes(), "no line twice, none missing"
        entry = report["manifest"]["raw_log_shipping"][f"worker{index}"]
        assert entry["worker_lost"] and entry["complete"] and entry["resumed_at"] is not None, entry
        assert entry["duplicates_skipped"] == 0 and entry["resumed_bytes"] == len(killed.read_bytes()), entry
        assert entry["resumed_at"] < entry["resumed_bytes"], entry  # the restart shipped lines
        assert any(w.startswith(f"worker {index} was lost; a process restarted on worker-0 shipped the rest")
                   for w in report["warnings"]), report["warnings"]  # fmt: skip
        assert "resuming the shipping of" in log_of(tmp_path, "worker-0-again")
        for mine in own:  # the others, and the restarted process's own log, as ever
            for written in (mine / "run").glob("requests.worker*.jsonl"):
                assert written.read_bytes() == (report_dir / written.name).read_bytes(), written.name
