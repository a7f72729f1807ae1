"""Reliability in real runs: every injected fault lands in the right outcome, stopping and
signals lose nothing, a failing plugin makes the run invalid, a worker with other plugins is
refused, and secrets never reach any output. Each run ends with the conservation check."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import (
    REPO,
    SCENARIOS,
    check_conservation,
    load_report,
    locust_cmd,
    raw_records,
    run_locust,
    truth_for,
)

pytestmark = pytest.mark.integration

EXPECTED = {
    None: "ok",
    "drop_mid_stream": "disconnected",
    "close_early": "incomplete",
    "malformed": "malformed_stream",
    "error_event": "in_band_error",
    "http_429": "http_error:429",
    "http_503": "http_error:503",
    "http_500": "http_error:500",
    "stall_after": "timeout_total",
    "trickle": "ok",
}


@pytest.mark.parametrize("engine", ["vllm", "openai"])
def test_every_injected_fault_is_classified_exactly(tmp_path, engine):
    report_dir = tmp_path / "r"
    faults = ["drop_mid_stream=0.08", "close_early=0.08", "malformed=0.08", "error_event=0.08",
              "http_429=0.05", "http_503=0.05", "http_500=0.05", "stall_after=2:0.05", "trickle=128:0.05"]  # fmt: skip
    sim_args = ["--profile", "fast", "--seed", "9", "--stall-seconds", "30", "--trickle-interval-ms", "1"]
    for f in faults:
        sim_args += ["--fault", f]
    with sim_process(*sim_args) as sim:
        proc = run_locust(
            "--headless", "-u", "8", "-r", "8", "-t", "8s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", engine, "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--request-timeout", "2", "--report-dir", str(report_dir), "--raw-log",
            "--max-failed-share", "100",  # over half the requests fail on purpose: validity is not the point
        )  # fmt: skip
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 1, proc.stderr[-3000:]  # valid, some requests failed
    check_conservation(report_dir)
    rows = [r for r in raw_records(report_dir) if r["outcome"] != "cancelled"]
    seen = set()
    for r in rows:
        fault = truth[r["request_id"]]["fault"]
        fault = fault.split("=")[0].split(":")[0] if fault else None
        assert r["outcome"] == EXPECTED[fault], (fault, r["outcome"], r["error"])
        seen.add(fault)
    assert len(seen) >= 8, seen  # most fault kinds actually happened in this run


def test_stop_with_long_streams_in_flight_counts_them_cancelled(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "big") as sim:
        proc = run_locust(
            "--headless", "-u", "6", "-r", "6", "-t", "3s", "--stop-timeout", "0",
            "--host", sim.url, "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    section = next(iter(report["engines"].values()))
    rows = raw_records(report_dir)
    cancelled = {r["request_id"] for r in rows if r["outcome"] == "cancelled"}
    # Every stream the server saw the client walk away from is `cancelled` (a stream the server
    # had just finished, but whose end the client had not read yet, is cancelled too).
    abandoned = {rid for rid, t in truth.items() if t.get("client_disconnected")}
    assert abandoned and abandoned <= cancelled
    for rid in cancelled - abandoned:
        assert rid not in truth or truth[rid]["t_end_ns"] is not None
    assert section["outcomes"]["cancelled"] == len(cancelled)
    # Cancelled requests are counted, never latency samples.
    assert section["e2e_ms"]["count"] == section["outcomes"].get("ok", 0)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_still_writes_reports(tmp_path, sig):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = subprocess.Popen(
            locust_cmd(
                "--headless",
                "-u",
                "6",
                "-r",
                "6",
                "-t",
                "60s",
                "--host",
                sim.url,
                "--scenario",
                str(SCENARIOS / "closed_small.toml"),
                "--report-dir",
                str(report_dir),
                "--raw-log",
            ),  # fmt: skip
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(5)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    assert (report_dir / "report.json").exists(), err[-3000:]
    report = check_conservation(report_dir)
    assert sum(e["requests"] for e in report["engines"].values()) >= 10
    assert "Traceback" not in err


def test_connection_refused_then_server_comes_back(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        url, port = sim.url, sim.port
    # The server is gone: every request fails fast as connect_error, none is lost.
    proc = subprocess.Popen(
        locust_cmd(
            "--headless",
            "-u",
            "2",
            "-r",
            "2",
            "-t",
            "8s",
            "--host",
            url,
            "--stop-timeout",
            "3",
            "--scenario",
            str(SCENARIOS / "closed_small.toml"),
            "--report-dir",
            str(report_dir),
            "--raw-log",
            "--skip-reachability-check",
        ),  # fmt: skip
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    with sim_process("--profile", "fast", "--port", str(port)):
        _, err = proc.communicate(timeout=60)
    report = check_conservation(report_dir)
    outcomes = next(iter(report["engines"].values()))["outcomes"]
    assert outcomes.get("connect_error", 0) >= 1 and outcomes.get("ok", 0) >= 5, (outcomes, err[-2000:])


PLUGIN = """
from loadkit import hookimpl

class Boom:
    @hookimpl
    def loadkit_request_finished(self, record):
        raise RuntimeError("boom from the test plugin")
"""


def test_exception_in_a_plugin_marks_run_invalid_and_names_it(tmp_path):
    report_dir = tmp_path / "r"
    locustfile = tmp_path / "boom_locustfile.py"
    locustfile.write_text(
        "from loadkit.locust.locustfile import LLM  # noqa: F401\n"
        "from loadkit.plugins import get_plugin_manager\n"
        + PLUGIN
        + "\nget_plugin_manager().register(Boom(), name='boom-plugin')\n"
    )
    with sim_process("--profile", "fast") as sim:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(locustfile),
                "--headless",
                "-u",
                "2",
                "-r",
                "2",
                "-t",
                "3s",
                "--host",
                sim.url,
                "--scenario",
                str(SCENARIOS / "closed_small.toml"),
                "--report-dir",
                str(report_dir),
            ],  # fmt: skip
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode != 0
    report = load_report(report_dir)
    assert report["valid"] is False
    assert any("boom-plugin" in e for e in report["invalid_reasons"]), report["invalid_reasons"]
    assert proc.returncode == 3
    check_conservation(report_dir)


def test_secrets_never_reach_any_output(tmp_path):
    secret = "sk-test-" + "9f8e7d6c5b4a" * 2
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "3s", "--host", sim.url, "--api-key", secret,
            "--scenario", str(SCENARIOS / "closed_small.toml"), "--report-dir", str(report_dir), "--raw-log",
            "--loglevel", "DEBUG",
        )  # fmt: skip
        proc_env = run_locust(
            "--headless", "-u", "1", "-r", "1", "-t", "2s", "--host", sim.url,
            "--scenario", str(SCENARIOS / "closed_small.toml"), "--report-dir", str(tmp_path / "e"),
            env={"LOADKIT_API_KEY": secret},
        )  # fmt: skip
    assert proc.returncode == 0 and proc_env.returncode == 0, proc.stderr[-2000:]
    subprocess.run(
        [sys.executable, "-m", "loadkit", "report", str(report_dir)],
        cwd=REPO,
        capture_output=True,
        timeout=60,
    )
    outputs = [proc.stdout, proc.stderr, proc_env.stdout, proc_env.stderr]
    for path in list(report_dir.rglob("*")) + list((tmp_path / "e").rglob("*")):
        if path.is_file():
            outputs.append(path.read_text(errors="replace"))
    assert len(outputs) > 6
    for text in outputs:
        assert secret not in text
    check_conservation(report_dir)


def test_one_byte_trickle_is_read_correctly(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--fault", "trickle=1:1.0", "--trickle-interval-ms", "0.2") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "4s", "--stop-timeout", "10", "--host", sim.url,
            "--scenario", str(SCENARIOS / "tiny_fixed.toml"), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_conservation(report_dir)
    rows = [r for r in raw_records(report_dir) if r["outcome"] != "cancelled"]
    assert len(rows) >= 3
    for r in rows:
        # Every byte its own read: SSE lines, JSON and UTF-8 reassembled, tokens as the server counted.
        assert r["outcome"] == "ok" and r["n_out"] == truth[r["request_id"]]["completion_tokens"] == 4
        assert truth[r["request_id"]]["fault"].startswith("trickle")


@pytest.mark.parametrize("honor", [False, True])
def test_429_retry_after_honoured_only_when_asked(tmp_path, honor):
    report_dir = tmp_path / "r"
    # Every request is a fast 429: without these, backoff would pace the users and the breaker
    # would stop the run (both tested in test_strict_servers.py); here only Retry-After counts.
    extra = ["--no-backoff", "--breaker", "off"]
    extra += ["--honor-retry-after"] if honor else []
    with sim_process("--profile", "fast", "--fault", "http_429=1.0", "--retry-after", "1") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "4s", "--stop-timeout", "3", "--host", sim.url,
            "--scenario", str(SCENARIOS / "tiny_fixed.toml"), "--report-dir", str(report_dir), "--raw-log", *extra,
        )  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]  # no request succeeded: the run is invalid
    report = check_conservation(report_dir)
    assert "Too many requests" in report["invalid_reasons"][0]
    rows = raw_records(report_dir)
    assert rows and all(r["outcome"] == "http_error:429" and r["retry_after_s"] == 1.0 for r in rows)
    if honor:
        assert len(rows) <= 2 * 6  # each user waits 1 s between requests
    else:
        assert len(rows) >= 30  # the offered load is kept
