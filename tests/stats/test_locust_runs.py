"""Real Locust processes (local, --processes 2, --master/--worker, a worker killed) running
tests/stats/fake_locustfile.py: the stats glue end to end, without any HTTP."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.ports import free_port

LOCUSTFILE = Path(__file__).with_name("fake_locustfile.py")
REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "INFO", *args]


def _popen(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        _cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    )


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _check_report(report_dir: Path, workers: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Conservation, raw log = report, and percentiles equal to the raw log's exact ones."""
    report = json.loads((report_dir / "report.json").read_text())
    rows = [
        json.loads(line)
        for p in sorted(report_dir.glob("requests*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    cons = report["conservation"]
    assert cons["holds"] and cons["scheduled"] == cons["sent"] == cons["outcomes_total"] == len(rows), cons
    assert len({r["request_id"] for r in rows}) == len(rows)
    fake = report["engines"]["fake"]
    assert fake["outcomes"] == _count(r["outcome"] for r in rows)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) > 100
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        values = [r[metric] for r in ok if r[metric] is not None]
        assert fake[metric]["count"] == len(values)
        for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            assert fake[metric][key] == pytest.approx(_nearest_rank(values, q), rel=1e-3), (metric, key)
    assert report["workers"]["count"] == workers
    return report, rows


def _check_sections_agree(report: dict[str, Any]) -> None:
    """Every section built from the records counts what the engine stats count: the sections
    ride the same snapshots, so the final handshake and a lost worker treat them alike."""
    fake = report["engines"]["fake"]
    cls = report["user_classes"]["FakeLLM"]
    stage = report["stages"]["fake"]["stages"][0]["stats"]
    turn = report["sessions"]["fake"]["turns"]["1"]
    lengths = report["lengths"]["by_target"]["fake"]
    for view in (cls, stage, turn):
        assert (view["requests"], view["ok"]) == (fake["requests"], fake["ok"]), (view, fake["outcomes"])
    assert lengths["input_server"]["count"] == fake["n_in"]["count"]
    assert (cls["slo"]["good"], cls["slo"]["judged"]) == (fake["slo"]["good"], fake["slo"]["judged"])
    assert 0 < fake["slo"]["good"] < fake["slo"]["judged"], fake["slo"]  # the SLO bites, both ways
    assert stage["slo_attainment"] == pytest.approx(fake["slo"]["good"] / fake["slo"]["judged"])


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return dict(sorted(out.items()))


def test_local_headless_run(tmp_path):
    proc = _popen(
        "--headless", "-u", "10", "-r", "10", "-t", "3s", "--report-dir", str(tmp_path), "--raw-log"
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    report, _ = _check_report(tmp_path, workers=0)
    assert report["valid"] and (tmp_path / "requests.jsonl").exists()
    assert "loadkit final" in out and "TTFT p50/p90/p99" in out


def test_processes_2_merges_both_workers(tmp_path):
    proc = _popen("--headless", "--processes", "2", "-u", "20", "-r", "20", "-t", "4s",
                  "--report-dir", str(tmp_path), "--raw-log", "--slo", "ttft_ms=30")  # fmt: skip
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-3000:]
    report, rows = _check_report(tmp_path, workers=2)
    assert report["valid"] and {r["worker"] for r in rows} == {0, 1}
    assert [w["status"] for w in report["workers"]["nodes"]] == ["final", "final"]
    assert (
        report["engines"]["fake"]["cancelled"] > 0
    )  # recorded at stop: they arrive with the final snapshots
    _check_sections_agree(report)


def test_separate_master_and_workers(tmp_path):
    port = str(free_port())
    master = _popen("--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--expect-workers", "2",
                    "--headless", "-u", "20", "-r", "20", "-t", "4s", "--report-dir", str(tmp_path), "--raw-log")  # fmt: skip
    workers = [_popen("--worker", "--master-host", "127.0.0.1", "--master-port", port) for _ in range(2)]
    try:
        _, err = master.communicate(timeout=90)
        assert master.returncode == 0, err[-3000:]
        for w in workers:
            w.communicate(timeout=30)
    finally:
        for p in (master, *workers):
            if p.poll() is None:
                p.kill()
    report, _ = _check_report(tmp_path, workers=2)
    assert report["valid"]


def test_killed_worker_is_marked_lost_and_its_data_kept(tmp_path):
    port = str(free_port())
    master = _popen("--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--expect-workers", "2",
                    "--headless", "-u", "20", "-r", "20", "-t", "14s", "--report-dir", str(tmp_path), "--raw-log",
                    "--slo", "ttft_ms=30")  # fmt: skip
    workers = [_popen("--worker", "--master-host", "127.0.0.1", "--master-port", port) for _ in range(2)]
    try:
        _wait_for_lines(tmp_path / "requests.worker1.jsonl", 50, timeout=30)
        time.sleep(5)  # at least one report (every 3 s) carries worker 1's data
        killed_at = time.time()
        victim = next(w for w in workers if _is_worker(tmp_path, w, 1))
        victim.send_signal(signal.SIGKILL)
        _, err = master.communicate(timeout=90)
    finally:
        for p in (master, *workers):
            if p.poll() is None:
                p.kill()
    report = json.loads((tmp_path / "report.json").read_text())
    context = json.dumps({k: report[k] for k in ("valid", "warnings", "conservation", "workers")}, indent=1)
    assert report["valid"] is False and report["workers"]["lost"] == 1, context
    lost = next(w for w in report["workers"]["nodes"] if w["status"] == "lost")
    assert lost["index"] == 1 and lost["last_seq"] >= 1, context
    assert killed_at <= lost["lost_at_unix"] <= killed_at + 15, (killed_at, context)
    assert lost["lost_reason"] in ("heartbeat missing", "no final stats within 5 s of stop"), context
    assert any("lost" in w for w in report["warnings"]), context
    assert report["conservation"]["holds"], context  # lost in-flight accounted apart
    fake = report["engines"]["fake"]
    # All of worker 0's requests are in the report, and worker 1's up to its last snapshot
    # (it had ≥ 50 requests 5 s before it died; it reports every 3 s).
    worker0 = len((tmp_path / "requests.worker0.jsonl").read_text().splitlines())
    worker1 = len((tmp_path / "requests.worker1.jsonl").read_text().splitlines())
    assert worker0 + 50 <= fake["requests"] <= worker0 + worker1, (
        worker0,
        worker1,
        fake["requests"],
        context,
    )
    _check_sections_agree(report)  # the lost worker's last snapshot counts in every section


def _wait_for_lines(path: Path, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"{path} never had {n} lines")


def _is_worker(report_dir: Path, proc: subprocess.Popen[str], index: int) -> bool:
    """Which process is worker `index`: the one whose pid wrote that worker's raw log lines."""
    path = str(report_dir / f"requests.worker{index}.jsonl")
    fd_dir = f"/proc/{proc.pid}/fd"
    return any(_readlink(os.path.join(fd_dir, fd)) == path for fd in os.listdir(fd_dir))


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""
