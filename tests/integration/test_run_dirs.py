"""One report directory per run (issue 32): every web-UI Start and every headless run writes a
directory of its own, a Start refused by pre-flight destroys nothing, and a distributed run's
workers write their raw logs where the master writes report.json. Real Locust processes
against the embedded simulator; every run that starts ends with the conservation check."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, stop_process, wait_for, web_ready
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records, run_locust
from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.strict_server import CHAT_FIELDS, StrictOpenAI

pytestmark = pytest.mark.integration

TINY = str(SCENARIOS / "tiny_fixed.toml")


def _complete(report_dir: Path) -> dict:
    """A whole run in ``report_dir``: report.json, its CSVs and HTML, a raw log that agrees."""
    for name in ("report.json", "stats.csv", "timeseries.csv", "report.html"):
        assert (report_dir / name).is_file(), (report_dir, name)
    report = check_conservation(report_dir)
    assert (
        report["conservation"]["sent"] > 0 and len(raw_records(report_dir)) == report["conservation"]["sent"]
    )
    assert report["manifest"]["report_dir"] == str(report_dir)
    return report


def test_web_ui_starts_each_write_a_directory_of_their_own_and_a_refused_one_destroys_nothing(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    given = tmp_path / "r"

    def start(refused: bool = False, **form: str) -> None:
        data = urllib.parse.urlencode({"user_count": "2", "spawn_rate": "2", **form}).encode()
        with urllib.request.urlopen(urllib.request.Request(base + "/swarm", data=data), timeout=10) as resp:
            answer = json.loads(resp.read())
        # A start loadkit refuses is a failed start in the form (test_strict_servers), with the reason.
        assert answer["success"] is not refused, answer
        assert not refused or "--strict-request" in answer["message"], answer

    def state() -> str:
        return str(get_json(base + "/stats/requests")["state"])

    def run_then_stop(report_dir: Path) -> None:
        start()
        wait_for("requests to finish", lambda: state() == "running" and get_json(base + "/stats/requests")["stats"][-1]["num_requests"] >= 5, 30)  # fmt: skip
        with urllib.request.urlopen(urllib.request.Request(base + "/stop", data=b""), timeout=10):  # POST
            pass
        wait_for(f"the report in {report_dir.name}", lambda: state() == "stopped" and (report_dir / "report.json").is_file(), 30)  # fmt: skip

    strict = StrictOpenAI(allowed=CHAT_FIELDS)  # refuses the fields loadkit adds (ignore_eos, min_tokens)
    with (
        sim_process("--profile", "fast") as sim,
        ScriptedServer(strict) as srv,
        open(tmp_path / "log", "wb") as log,
    ):
        proc = subprocess.Popen(
            locust_cmd(
                "--web-host",
                "127.0.0.1",
                "--web-port",
                str(port),
                "--host",
                sim.url,
                "--engine",
                "vllm",
                "--scenario",
                TINY,
                "--report-dir",
                str(given),
                "--raw-log",
                "--no-console-table",
                "--stop-timeout",
                "3",
            ),  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        try:
            wait_for("the web UI", web_ready(base), 30)
            run_then_stop(given)
            time.sleep(0.3)
            run_then_stop(tmp_path / "r-2")
            kept = {d: (d / "report.json").read_bytes() for d in (given, tmp_path / "r-2")}
            # A third start that pre-flight refuses: a strict server, and --strict-request from the form.
            start(refused=True, host=srv.url, strict_request="true")
            wait_for("the refused start's report", lambda: (tmp_path / "r-3" / "report.json").is_file(), 30)
            wait_for("the refused start to stop", lambda: state() == "stopped", 30)
            time.sleep(0.5)
        finally:
            stop_process(proc)
    text = (tmp_path / "log").read_text()
    first, second = _complete(given), _complete(tmp_path / "r-2")
    assert first["valid"] and second["valid"], text[-3000:]
    assert (
        first["manifest"]["prompts"]["salt"] != second["manifest"]["prompts"]["salt"]
    )  # each Start salts anew
    # Two runs, two sets of requests: nothing of the first in the second's files.
    assert not {r["request_id"] for r in raw_records(given)} & {
        r["request_id"] for r in raw_records(tmp_path / "r-2")
    }
    # The refused start (and the exit) rewrote neither earlier report; its own says why it is invalid.
    assert {d: (d / "report.json").read_bytes() for d in kept} == kept
    refused = json.loads((tmp_path / "r-3" / "report.json").read_text())
    assert not refused["valid"] and any("could not start" in r for r in refused["invalid_reasons"]), refused
    assert "--strict-request: stopped" in text and len(strict.posts()) == 1  # the pre-flight request only
    assert f"reports go to {tmp_path / 'r-2'}" in text and "Traceback" not in text, text[-3000:]


def test_headless_runs_with_one_report_dir_each_get_their_own_and_workers_follow_the_master(tmp_path):
    given = tmp_path / "r"
    args = ["--headless", "-u", "4", "-r", "4", "--stop-timeout", "3", "--engine", "vllm", "--scenario", TINY,
            "--report-dir", str(given), "--raw-log", "--no-console-table"]  # fmt: skip
    port = str(free_port())
    with sim_process("--profile", "fast") as sim:
        local = run_locust(*args, "-t", "3s", "--host", sim.url, timeout=90)
        # Workers take a second or two to start on a loaded machine: a longer run.
        distributed = run_locust(*args, "-t", "6s", "--host", sim.url, "--processes", "2", "--master-bind-port", port,
                                 "--master-port", port, timeout=120)  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    assert distributed.returncode == 0, distributed.stderr[-3000:]
    _complete(given)
    assert (given / "requests.jsonl").is_file() and not list(given.glob("requests.worker*.jsonl"))
    second = _complete(tmp_path / "r-2")
    # The workers' raw logs are in the master's per-run directory, one line per request of its report.
    assert sorted(p.name for p in (tmp_path / "r-2").glob("requests*.jsonl")) == [
        "requests.worker0.jsonl",
        "requests.worker1.jsonl",
    ]
    assert second["manifest"]["workers"] == 2
    assert (
        f"--report-dir {given} holds an earlier run: this run's reports go to {tmp_path / 'r-2'}"
        in distributed.stderr
    )
