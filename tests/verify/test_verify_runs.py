"""`loadkit verify` over real headless Locust runs against the simulator: it agrees with
report.json on one target, two targets and two user classes, sessions, and two worker
processes; and it fails, naming the figure, when report.json is tampered with."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, load_report, run_locust

pytestmark = pytest.mark.integration

TWO_SCENARIOS = REPO / "tests" / "integration" / "locustfiles" / "two_scenarios.py"


def verify(report_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The shipped command, as a user runs it."""
    cmd = [sys.executable, "-m", "loadkit", "verify", str(report_dir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


def checked(out: str, section: str) -> int:
    """How many figures `loadkit verify` says it compared in ``section``."""
    for line in out.splitlines():
        if line.strip().startswith(f"checked {section}:"):
            return int(line.split(":")[1].split()[0])
    return 0


def agrees(report_dir: Path) -> str:
    check_conservation(report_dir)  # the integration suite's own check still holds
    proc = verify(report_dir)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "DISAGREES" not in proc.stdout and "OK:" in proc.stdout
    return proc.stdout


def tampered(report_dir: Path, copy: Path, change: Any) -> subprocess.CompletedProcess[str]:
    """`loadkit verify` on a copy of the run whose report.json ``change(doc)`` edited."""
    shutil.copytree(report_dir, copy)
    doc = json.loads((copy / "report.json").read_text())
    change(doc)
    (copy / "report.json").write_text(json.dumps(doc))
    return verify(copy)


def test_one_target_with_events_agrees_and_tampering_is_named(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "3") as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "5s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "openai", "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--slo", "ttft_ms=15,tpot_ms=5,itl_ms=20", "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = agrees(report_dir)
    assert "not checked: ITL" not in out  # per-event times in the log: ITL was recomputed
    assert checked(out, "engines") > 100 and checked(out, "conservation") >= 6
    report = json.loads((report_dir / "report.json").read_text())
    engine = next(iter(report["engines"]))
    assert report["engines"][engine]["slo"]["judged"] > 10

    section = report["engines"][engine]

    def one_more_ok(doc: dict[str, Any]) -> None:
        doc["engines"][engine]["ok"] += 1

    proc = tampered(report_dir, tmp_path / "t1", one_more_ok)
    assert proc.returncode == 1, proc.stdout
    assert (
        f"DISAGREES engines / {engine} / ok: report {section['ok'] + 1}, recomputed {section['ok']} (tolerance 0)"
        in proc.stdout
    )

    def slower_p99(doc: dict[str, Any]) -> None:
        doc["engines"][engine]["ttft_ms"]["p99"] *= 1.01  # ten times the histogram's resolution

    proc = tampered(report_dir, tmp_path / "t2", slower_p99)
    assert proc.returncode == 1, proc.stdout
    assert (
        f"engines / {engine} / ttft_ms.p99: report {section['ttft_ms']['p99'] * 1.01}, recomputed"
        in proc.stdout
    )
    assert "(tolerance 0.0" in proc.stdout

    def itl_p99(doc: dict[str, Any]) -> None:
        doc["engines"][engine]["itl_ms"]["p99"] *= 1.01

    assert f"engines / {engine} / itl_ms.p99: report" in tampered(report_dir, tmp_path / "t3", itl_p99).stdout

    def one_less_good(doc: dict[str, Any]) -> None:
        doc["engines"][engine]["slo"]["good"] -= 1

    assert (
        f"engines / {engine} / slo.good: report"
        in tampered(report_dir, tmp_path / "t4", one_less_good).stdout
    )

    def faster(doc: dict[str, Any]) -> None:
        doc["engines"][engine]["output_tokens_per_s"] *= 1.001  # one process: its window is exact

    assert (
        f"engines / {engine} / output_tokens_per_s: report"
        in tampered(report_dir, tmp_path / "t5", faster).stdout
    )


def test_two_targets_two_user_classes_agree(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--serve", "openai:0:profile=fast", "--serve", "openai:0:profile=fast") as sim:
        fast, big = sim.urls
        proc = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(TWO_SCENARIOS), "--headless", "--no-console-table",
             "-u", "5", "-r", "5", "-t", "5s", "--stop-timeout", "5", "--target", f"fast={fast}",
             "--target", f"big={big}", "--slo", "ttft_ms=20,e2e_ms=300",
             "--report-dir", str(report_dir), "--raw-log"],
            capture_output=True, text=True, timeout=150, cwd=REPO,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert set(report["engines"]) == {"fast", "big"}
    assert set(report["user_classes"]) == {"Scheduled", "BackToBack"}
    out = agrees(report_dir)
    assert checked(out, "user_classes") > 100

    def class_label_count(doc: dict[str, Any]) -> None:
        doc["user_classes"]["BackToBack"]["engines"]["big"]["labels"]["short"]["requests"] += 1

    proc = tampered(report_dir, tmp_path / "t", class_label_count)
    assert (
        proc.returncode == 1
        and "user_classes / BackToBack / big / label short / requests: report" in proc.stdout
    )
    assert "not checked: ITL" in out  # no --raw-log-events: said, not silently skipped


def test_sessions_agree_per_turn(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "6s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", "agent-multiturn",
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((report_dir / "report.json").read_text())
    turns = next(iter(report["sessions"].values()))["turns"]
    assert len(turns) >= 2, turns
    out = agrees(report_dir)
    assert checked(out, "sessions") >= 5 * len(turns)

    def turn_p99(doc: dict[str, Any]) -> None:
        next(iter(doc["sessions"].values()))["turns"]["1"]["ttft_ms"]["p99"] *= 1.01

    proc = tampered(report_dir, tmp_path / "t", turn_p99)
    assert proc.returncode == 1 and "sessions / openai / turn 1 / ttft_ms.p99: report" in proc.stdout


def test_two_processes_with_stages_and_slos_agree(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "4") as sim:
        proc = run_locust(
            "--headless", "--processes", "2", "-u", "4", "-r", "4", "-t", "8s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(Path(__file__).with_name("staged_short.toml")),
            "--slo", "ttft_ms=10", "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list(report_dir.glob("requests.worker*.jsonl"))) == 2
    rows = next(iter(load_report(report_dir)["stages"].values()))["stages"]
    # Worker start-up on a loaded machine can eat into the schedule: stage 2 may be empty.
    reached = sum(1 for row in rows if row["stats"])
    assert reached >= 1
    out = agrees(report_dir)
    # Per stage reached: 3 counts, 4 metrics × 3 percentiles, SLO attainment (an empty one: 0 requests).
    assert checked(out, "stages") >= 16 * reached
    first = next(row["name"] for row in rows if row["stats"])

    def stage_ok(doc: dict[str, Any]) -> None:
        next(r for r in doc["stages"]["openai"]["stages"] if r["name"] == first)["stats"]["ok"] -= 1

    proc = tampered(report_dir, tmp_path / "t1", stage_ok)
    assert proc.returncode == 1 and f"stages / openai / stage {first} / ok: report" in proc.stdout
    # Each request once: a worker's line lost, or written twice, breaks conservation.
    for name, keep in (("t2", slice(1, None)), ("t3", slice(None))):
        copy = tmp_path / name
        shutil.copytree(report_dir, copy)
        log = next(p for p in sorted(copy.glob("requests.worker*.jsonl")) if p.read_text().strip())
        lines = log.read_text().splitlines()
        extra = [] if name == "t2" else lines[:1]
        log.write_text("\n".join(lines[keep] + extra) + "\n")
        proc = verify(copy)
        assert proc.returncode == 1, proc.stdout
        want = (
            "conservation / raw log / sent: report"
            if name == "t2"
            else "conservation / raw log / request ids seen twice"
        )
        assert want in proc.stdout, proc.stdout


def test_reasoning_and_tool_call_channels_agree(tmp_path):
    """A reasoning simulator whose replies call a tool: the channel figures (time to first
    reasoning / tool-call token, reasoning time, tokens per channel) are recomputed too."""
    report_dir = tmp_path / "r"
    tools = json.dumps(
        {"tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}
    )
    with sim_process("--engine", "openai", "--profile", "fast", "--seed", "7", "--reasoning-mean-tokens", "6",
                     "--reasoning-dist", "uniform", "--reasoning-format", "parser") as sim:  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "5s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--api", "chat", "--model", "sim-fast",
            "--scenario", str(SCENARIOS / "closed_small.toml"), "--extra-body", tools, "--slo", "ttft_ms=30",
            "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = next(iter(load_report(report_dir)["engines"].values()))
    assert (
        section["ttfrt_ms"]["count"] > 0
        and section["ttftc_ms"]["count"] > 0
        and section["n_tool"]["count"] > 0
    )
    agrees(report_dir)


def test_failed_and_timed_out_requests_agree(tmp_path):
    """Injected faults (dropped streams, HTTP errors, in-band errors, stalls past the timeout)
    after a warm-up: failures per outcome, the failure-message totals and the SLO verdicts of
    failed requests are recomputed too."""
    report_dir = tmp_path / "r"
    sim_args = ["--profile", "fast", "--seed", "9", "--stall-seconds", "30"]
    for fault in ("drop_mid_stream=0.1", "error_event=0.1", "http_503=0.1", "stall_after=2:0.05"):
        sim_args += ["--fault", fault]
    with sim_process(*sim_args) as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "6s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--request-timeout", "1", "--max-failed-share", "100", "--slo", "e2e_ms=400", "--warmup", "1",
            "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # some requests failed, on purpose
    section = next(iter(load_report(report_dir)["engines"].values()))
    assert section["failures"] >= 3 and len(section["outcomes"]) >= 3, section["outcomes"]
    out = agrees(report_dir)
    assert checked(out, "engines") > 100
    # Warm-up requests are in the stage table but not in the raw log: said, not a disagreement.
    assert (
        "not checked: stages warmup because warm-up requests are not in the raw log" in out
        and checked(out, "stages") >= 16
    )
