"""A target that dies during a real headless run (the simulator process killed mid-run, issue
32): the breaker's time rule stops the run within --breaker-dead-after plus a backoff wait, with
one line naming the target, the first failure's time and its error; the moment it became
unreachable is printed once, and a target that comes back (restarted on the same port) is
"reachable again". report.json records both; every run ends with the conservation check."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records
from tests.integration.test_strict_servers import breaker_lines, two_processes

pytestmark = pytest.mark.integration

TINY = str(SCENARIOS / "tiny_fixed.toml")
BACKOFF_CAP_S = 5.0  # --backoff-max's default: the longest a user waits between two failures


def start_run(url: str, report_dir, *extra: str, users: int = 4, seconds: int = 60) -> subprocess.Popen[str]:
    return subprocess.Popen(
        locust_cmd("--headless", "-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--stop-timeout", "3",
                   "--host", url, "--scenario", TINY, "--report-dir", str(report_dir), "--raw-log",
                   "--no-console-table", *extra),  # fmt: skip
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_requests(sim, n: int, timeout_s: float = 60.0) -> None:
    """Until the simulator has answered ``n`` requests (the run is under way)."""
    deadline = time.monotonic() + timeout_s
    while len(sim.truth_records()) < n:
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.1)


def lines_with(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line and line.startswith("[")]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_target_killed_mid_run_stops_the_run_on_time(tmp_path, processes):
    report_dir = tmp_path / "r"
    extra = two_processes() if processes > 1 else []
    with sim_process("--profile", "fast") as sim:
        proc = start_run(sim.url, report_dir, *extra)
        wait_for_requests(sim, 20)
        sim.process.kill()  # the target dies: no goodbye, every new connection refused
        killed = time.monotonic()
        _, err = proc.communicate(timeout=120)
        after_kill = time.monotonic() - killed
    assert proc.returncode == 3, err[-3000:]
    # The window rule (200 requests, 50 at least) would need minutes at 4 users with backoff;
    # -t is 60 s. The time rule: 10 s without a success, then at most one backoff wait more.
    assert after_kill < 10 + BACKOFF_CAP_S + 10, (after_kill, err[-3000:])
    report = check_conservation(report_dir)
    ((name, section),) = report["engines"].items()
    assert section["outcomes"]["ok"] >= 20 and section["outcomes"].get("connect_error", 0) >= 2, section[
        "outcomes"
    ]
    reasons = [r for r in report["invalid_reasons"] if "circuit breaker" in r]
    assert len(reasons) == 1, report["invalid_reasons"]
    reason = reasons[0]
    assert f"target {name!r}: no request succeeded for" in reason and "--breaker-dead-after 10" in reason
    assert re.search(r"since the first failure at \d\d:\d\d:\d\d failed", reason), reason
    assert "Connection refused" in reason or "disconnected" in reason, reason
    assert breaker_lines(err) == 1, err[-3000:]
    down = lines_with(err, f"target {name!r} unreachable since")
    assert len(down) == 1 and "connect_error: cannot connect" in down[0], err[-3000:]
    events = report["manifest"]["reachability"][name]
    assert [e["event"] for e in events] == ["unreachable"] and "Connection refused" in events[0]["error"]
    # Nothing reached a dead target: no request after the first refused one succeeded.
    rows = sorted(raw_records(report_dir), key=lambda r: r["t_send_ns"])
    first_refused = next(r["t_send_ns"] for r in rows if r["outcome"] == "connect_error")
    assert not [r for r in rows if r["t_send_ns"] > first_refused and r["outcome"] == "ok"]


def test_a_target_that_comes_back_is_reachable_again(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        port = sim.port
        proc = start_run(sim.url, report_dir, users=2, seconds=16)
        wait_for_requests(sim, 10)
        sim.process.kill()
    time.sleep(3)  # under --breaker-dead-after (10 s): the run goes on
    with sim_process("--profile", "fast", "--port", str(port)) as back:
        _, err = proc.communicate(timeout=120)
        answered_after = len(back.truth_records())
    report = check_conservation(report_dir)
    ((name, section),) = report["engines"].items()
    assert not [r for r in report["invalid_reasons"] if "circuit breaker" in r], report["invalid_reasons"]
    assert section["outcomes"].get("connect_error", 0) >= 1 and answered_after >= 5, (
        section["outcomes"],
        err[-3000:],
    )
    assert len(lines_with(err, f"target {name!r} unreachable since")) == 1, err[-3000:]
    back_lines = lines_with(err, f"target {name!r} reachable again after")
    assert len(back_lines) == 1, err[-3000:]
    seconds = float(re.search(r"reachable again after ([\d.]+) s", back_lines[0]).group(1))
    assert 2.5 <= seconds <= 3 + BACKOFF_CAP_S + 3, back_lines[0]
    events = report["manifest"]["reachability"][name]
    assert [e["event"] for e in events] == ["unreachable", "reachable"], events
    assert events[1]["after_s"] == pytest.approx(seconds, abs=0.1) and events[1]["t"] > events[0]["t"]
