"""Real headless runs against OpenAI-compatible servers that end, fail and die the ways real
ones do: the outcome is right, the server's own words reach the console and the report, the
validity and the exit code tell the truth. Each run ends with the conservation check."""

from __future__ import annotations

import json
import queue
import threading

import pytest

from tests.helpers import variants
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust
from tests.helpers.scripted_server import ScriptedServer, ScriptedServerProcess

pytestmark = pytest.mark.integration

TINY = str(SCENARIOS / "tiny_fixed.toml")


def headless(url: str, report_dir, *extra: str, seconds: int = 3, users: int = 2) -> list[str]:
    return ["--headless", "-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--stop-timeout", "2",
            "--host", url, "--engine", "vllm", "--scenario", TINY, "--report-dir", str(report_dir),
            "--raw-log", *extra]  # fmt: skip


def only_engine(report: dict) -> dict:
    (section,) = report["engines"].values()
    return section


def test_no_done_with_usage_in_the_finish_chunk_is_ok_and_measured(tmp_path):
    report_dir = tmp_path / "r"
    with ScriptedServer(variants.server(variants.no_done())) as srv:
        proc = run_locust(*headless(srv.url, report_dir))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = check_conservation(report_dir)
    assert report["valid"] is True, report["invalid_reasons"]
    s = only_engine(report)
    rows = [r for r in raw_records(report_dir) if r["outcome"] != "cancelled"]
    assert len(rows) >= 20 and all(r["outcome"] == "ok" and r["end"] == "close" for r in rows)
    assert all(
        r["n_out"] == 4 and r["n_out_source"] == "usage" and r["finish_reason"] == "length" for r in rows
    )
    assert s["stream_ends"] == {"close": s["ok"]}
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert s[metric]["count"] > 0 and s[metric]["p50"] is not None, metric
    assert "ended by a clean close" in proc.stdout


def test_no_done_and_no_finish_reason_stays_incomplete_and_the_run_is_invalid(tmp_path):
    report_dir = tmp_path / "r"
    with ScriptedServer(variants.server(variants.no_done_no_finish)) as srv:
        proc = run_locust(*headless(srv.url, report_dir))
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = check_conservation(report_dir)
    s = only_engine(report)
    assert s["ok"] == 0 and s["outcomes"]["incomplete"] > 10
    assert report["valid"] is False
    assert any("no request succeeded" in r and "incomplete" in r for r in report["invalid_reasons"])
    assert s["ttft_ms"]["p50"] is None  # no ok request: not measured, never 0
    assert "run INVALID:" in proc.stdout and "no request succeeded" in proc.stdout


def test_in_band_error_message_reaches_console_report_and_locust_table(tmp_path):
    report_dir = tmp_path / "r"
    script = variants.server(variants.with_done, every=3, other=variants.in_band_error)
    with ScriptedServer(script) as srv:
        proc = run_locust(*headless(srv.url, report_dir))
    # A third of the requests failed: the run is valid, the exit code says some failed.
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = check_conservation(report_dir)
    assert report["valid"] is True, report["invalid_reasons"]
    s = only_engine(report)
    failed = s["outcomes"]["in_band_error"]
    assert failed >= 5 and s["failures"] == failed
    entry = s["error_messages"]["in_band_error"]
    assert entry["total"] == failed and entry["top"] == [
        {
            "message": variants.IN_BAND_MESSAGE,
            "count": failed,
            "template": variants.IN_BAND_MESSAGE,
            "varied": False,
        }
    ]
    assert entry["other"] == 0
    assert f"in_band_error ×{failed}: {variants.IN_BAND_MESSAGE}" in proc.stdout
    # Locust's own failure table names the server's message, not just the outcome.
    assert f"in_band_error: {variants.IN_BAND_MESSAGE}" in proc.stdout + proc.stderr
    assert "RequestOutcomeError(" not in proc.stdout + proc.stderr


def test_strict_server_422_text_is_in_console_and_report(tmp_path):
    report_dir = tmp_path / "r"
    # Pre-flight's request goes through; every request of the run is refused (pre-flight and
    # its dropping of refused fields are tested in test_strict_servers.py).
    with ScriptedServer(variants.server(variants.with_done, strict=True, strict_from=1)) as srv:
        proc = run_locust(
            *headless(srv.url, report_dir, "--no-backoff", "--breaker", "off", seconds=2, users=1)
        )
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = check_conservation(report_dir)
    s = only_engine(report)
    n = s["outcomes"]["http_error:422"]
    detail = json.dumps(variants.STRICT_DETAIL)
    assert s["error_messages"]["http_error:422"]["top"] == [
        {"message": detail, "count": n, "template": detail, "varied": False}
    ]
    assert f"http_error:422 ×{n}: {detail}" in proc.stdout
    (reason,) = report["invalid_reasons"]
    assert "no request succeeded" in reason and "Unexpected fields" in reason


def test_server_that_dies_after_two_seconds(tmp_path):
    """The server dies once it has served 25 streams (about two seconds of them): counted by the
    server, not a timer started before Locust, whose start-up alone can take two seconds."""
    report_dir = tmp_path / "r"
    srv = ScriptedServerProcess(variants.server(variants.with_done))

    def kill_after_served(n: int) -> None:
        try:
            for _ in range(n):
                srv.write_times(timeout=60)
        except queue.Empty:  # the run ended first; the assertions below say what it measured
            return
        srv.kill()

    with srv:
        killer = threading.Thread(target=kill_after_served, args=(25,), daemon=True)
        killer.start()
        proc = run_locust(*headless(srv.url, report_dir, "--skip-reachability-check", seconds=6, users=1))
    report = check_conservation(report_dir)
    s = only_engine(report)
    assert s["ok"] >= 20, s["outcomes"]  # two seconds of a working server were measured
    after = s["outcomes"].get("connect_error", 0)
    assert after >= 1 and s["error_messages"]["connect_error"]["total"] == after
    assert any("refused" in m["message"].lower() for m in s["error_messages"]["connect_error"]["top"])
    # Once the server is gone the user backs off (its failures come back in microseconds), so
    # the failures stay a minority: a valid run whose exit code says some requests failed, and
    # whose console names what the failures were.
    assert after <= 12, s["outcomes"]  # 2 s of backoff from 50 ms doubling: a handful, not thousands
    assert report["valid"] is True and proc.returncode == 1, report["invalid_reasons"]
    assert "connect_error ×" in proc.stdout and "refused" in proc.stdout.lower()


@pytest.mark.slow
def test_distributed_auto_detected_target_and_exact_message_counts(tmp_path):
    """Master + two workers, --engine auto against a server with no engine fingerprint: only
    the master probes, every node names the target host:port, and the failure messages the
    workers counted add up exactly in the master's report."""
    import subprocess

    from tests.helpers.ports import free_port
    from tests.helpers.runs import REPO, locust_cmd
    from tests.integration.test_distributed import worker_args

    report_dir, port = tmp_path / "r", free_port()
    script = variants.server(variants.with_done, every=4, other=variants.in_band_error)
    with ScriptedServer(script) as srv:
        master_args = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                       "--headless", "--expect-workers", "2", "-u", "4", "-r", "4", "-t", "5s", "--stop-timeout", "3",
                       "--host", srv.url, "--engine", "auto", "--scenario", TINY, "--report-dir", str(report_dir),
                       "--raw-log"]  # fmt: skip
        procs = [subprocess.Popen(locust_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  cwd=REPO) for args in (master_args, worker_args(port), worker_args(port))]  # fmt: skip
        try:
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        requests = list(srv.requests)
    master_out, master_err = outs[0]
    report = check_conservation(report_dir)
    name = srv.url.removeprefix("http://")
    assert list(report["engines"]) == [name], master_err[-2000:]
    (target,) = report["manifest"]["targets"]
    assert (
        target["detection"]["engine"] == "openai"
        and target["detection"]["probes"]["/v1/models"]["status"] == 200
    )
    # Probed once, by the master; said once, by the master.
    assert sum(r.startswith(b"GET /version ") for r in requests) == 1
    assert master_err.count("--engine auto: found: openai") == 1
    assert all("--engine auto" not in err for _, err in outs[1:])
    s = report["engines"][name]
    failed = s["outcomes"]["in_band_error"]
    rows = raw_records(report_dir)
    assert {r["worker"] for r in rows} == {0, 1} and failed >= 4
    assert s["error_messages"]["in_band_error"] == {"total": failed, "other": 0,
                                                    "top": [{"message": variants.IN_BAND_MESSAGE, "count": failed,
                                                             "template": variants.IN_BAND_MESSAGE, "varied": False}]}  # fmt: skip
    assert (
        sum(1 for r in rows if r["outcome"] == "in_band_error" and r["error"] == variants.IN_BAND_MESSAGE)
        == failed
    )
    assert f"in_band_error ×{failed}: {variants.IN_BAND_MESSAGE}" in master_out


def test_sessions_go_past_turn_one_against_a_server_without_done(tmp_path):
    """Multi-turn sessions stopped at turn 1 when every stream was `incomplete`; a clean close
    after the finish chunk is a normal end, so every turn follows."""
    report_dir = tmp_path / "r"
    with ScriptedServer(variants.server(variants.no_done())) as srv:
        proc = run_locust("--headless", "-u", "2", "-r", "2", "-t", "3s", "--stop-timeout", "2", "--host", srv.url,
                          "--engine", "vllm", "--scenario", str(SCENARIOS / "sessions_prefix.toml"),
                          "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    check_conservation(report_dir)
    rows = [r for r in raw_records(report_dir) if r["outcome"] != "cancelled"]
    assert all(r["outcome"] == "ok" and r["end"] == "close" for r in rows)
    assert {r["turn"] for r in rows} >= {1, 2, 3, 4}
