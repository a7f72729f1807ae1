"""Locustfiles written with the public user API (docs/locustfiles.md), run by real Locust
processes against the simulator: the shipped examples locally and with --processes 2, several
scenario classes on their own targets, tags, a locustfile's own load shape. Each run ends with
the conservation check, and the per-class section must add up to the per-engine one."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadkit.sim.testing import sim_process
from loadkit.workload.arrival import arrival_offsets, stages_from_spec
from tests.helpers.ports import free_port
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, raw_records

pytestmark = pytest.mark.integration

EXAMPLES = REPO / "locustfiles"
HERE = Path(__file__).resolve().parent / "locustfiles"


def run_file(locustfile: Path, *args: str, processes: bool = False, env: dict[str, str] | None = None,
             timeout: float = 150) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``locust -f locustfile --headless ARGS``; with ``processes``, two workers on a port of
    their own (Locust's default 5557 may be taken by another run on this machine)."""
    extra: list[str] = []
    if processes:
        port = str(free_port())
        extra = ["--processes", "2", "--master-bind-port", port, "--master-port", port]
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile),
        "--headless",
        "--no-console-table",
        *extra,
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, **(env or {})})  # fmt: skip


def check_classes(report: dict[str, Any], rows: list[dict[str, Any]], classes: set[str]) -> dict[str, Any]:
    """The per-class section covers every request once: per class, per engine and label, it
    counts what the raw log says that class sent, and the classes add up to the engines."""
    by_class = report["user_classes"]
    assert set(by_class) == classes, set(by_class)
    assert sum(c["requests"] for c in by_class.values()) == sum(
        e["requests"] for e in report["engines"].values()
    )
    counted: dict[tuple[str, str, str], int] = defaultdict(int)
    for r in rows:
        counted[(r["user_class"], r["engine"], r["label"])] += 1
    for name, section in by_class.items():
        for engine, sub in section["engines"].items():
            for label, lab in sub["labels"].items():
                assert lab["requests"] == counted[(name, engine, label)], (name, engine, label)
    assert sum(counted.values()) == len(rows)
    return by_class


def max_in_flight(rows: list[dict[str, Any]]) -> int:
    """The most requests open at one moment (sends and ends on the machine's monotonic clock)."""
    events = sorted([(r["t_send_ns"], 1) for r in rows] + [(r["t_end_ns"], -1) for r in rows])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def workers_of(rows: list[dict[str, Any]]) -> set[Any]:
    return {r["worker"] for r in rows}


@pytest.mark.parametrize("processes", [False, True], ids=["local", "processes2"])
def test_rag_example_sends_one_long_shared_context(tmp_path, processes):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(EXAMPLES / "rag.py", "-u", "6", "-r", "6", "-t", "8s", "--stop-timeout", "5",
                        "--host", sim.url, "--report-dir", str(report_dir), "--raw-log", processes=processes)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    rag = check_classes(report, rows, {"RAG"})["RAG"]
    assert set(rag["engines"]["openai"]["labels"]) == {"rag:answer", "rag:summary"}
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) >= 20
    # ~3,000 tokens of context on every request, and the same bytes every time: after the
    # first request per worker the simulator's prefix cache holds nearly all of it.
    assert min(r["n_in"] for r in ok) >= 2_800
    warm = [r for r in ok if (r["cached_tokens"] or 0) >= 2_700]
    assert len(warm) >= len(ok) - 2 * len(workers_of(rows)) - 6, [r["cached_tokens"] for r in ok]
    if processes:
        assert len(workers_of(rows)) == 2


@pytest.mark.parametrize("processes", [False, True], ids=["local", "processes2"])
def test_agent_example_runs_sessions_shaped_by_the_replies(tmp_path, processes):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(EXAMPLES / "agent.py", "-u", "6", "-r", "6", "-t", "8s", "--stop-timeout", "8",
                        "--host", sim.url, "--report-dir", str(report_dir), "--raw-log",
                        "--session-header", "X-Session-ID", processes=processes)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    agent = check_classes(report, rows, {"Agent"})["Agent"]
    labels = set(agent["engines"]["openai"]["labels"])
    assert "agent:turn1" in labels and labels <= {"agent:turn1", "agent:after_search", "agent:after_calculator",
                                                  "agent:after_models"}  # fmt: skip
    assert len(labels) >= 3  # several kinds of tool result were sent back
    sessions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        sessions[r["session_id"]].append(r)
    lengths = set()
    for turns in sessions.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
        assert turns[0]["label"] == "agent:turn1"
        ok = [r for r in turns if r["outcome"] == "ok"]
        assert all(
            b["n_in"] > a["n_in"] + a["n_out"] for a, b in zip(ok, ok[1:], strict=False)
        )  # history grows
        lengths.add(len(turns))
    assert len(lengths) >= 3, lengths  # episodes of different lengths: not a fixed script
    # The sessions stats count each episode once, under the target.
    counted = report["sessions"]["openai"]
    assert counted["sessions"] == len(sessions) and counted["completed"] >= len(sessions) - 6
    # The `models` tool is a real HTTP call through Locust's client: Locust's own table has it.
    assert "tool: /v1/models" in proc.stdout + proc.stderr
    if processes:
        assert len(workers_of(rows)) == 2


def example_decisions(texts: list[str]) -> tuple[list[str | None], int]:
    """The example's own `decide` on each reply (in a child process: the example imports Locust,
    whose monkey patching must stay out of this one), and its MAX_STEPS."""
    code = ("import sys, orjson; from locustfiles.agent import MAX_STEPS, decide; texts = orjson.loads(sys.stdin.buffer.read()); "
            "sys.stdout.buffer.write(orjson.dumps([[(d or [None])[0] for d in map(decide, texts)], MAX_STEPS]))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], input=orjson.dumps(texts), capture_output=True, cwd=REPO,
                         timeout=60, check=True).stdout  # fmt: skip
    decided, max_steps = orjson.loads(out)
    return decided, int(max_steps)


def test_agent_sends_what_its_reply_asked_for(tmp_path):
    """The agent's next turn follows the reply: the turn after a reply is the tool `decide`
    picks for that reply's text, and an episode ends exactly when it picks none."""
    trail_path = tmp_path / "trail.jsonl"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(HERE / "follow_replies.py", "-u", "4", "-r", "4", "-t", "6s", "--stop-timeout", "8",
                        "--host", sim.url, "--report-dir", str(tmp_path / "r"), "--raw-log",
                        env={"LOADKIT_TEST_TRAIL": str(trail_path)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_conservation(tmp_path / "r")
    trail = [orjson.loads(line) for line in trail_path.read_bytes().splitlines()]
    assert len(trail) == len(raw_records(tmp_path / "r"))
    decided, max_steps = example_decisions([t["text"] for t in trail])
    sessions: dict[str, list[tuple[dict[str, Any], str | None]]] = defaultdict(list)
    for t, action in zip(trail, decided, strict=True):
        sessions[t["session_id"]].append((t, action))
    checked = 0
    for turns in sessions.values():
        turns.sort(key=lambda pair: pair[0]["turn"])
        for (before, action), (after, _) in zip(turns, turns[1:], strict=False):
            assert before["outcome"] == "ok" and action is not None
            assert after["label"] == f"agent:after_{action}"
            checked += 1
        last, action = turns[-1]
        if last["outcome"] == "ok":  # (--stop-timeout lets every episode finish)
            assert action is None or len(turns) == max_steps + 1, turns  # the final answer, or the step cap
    assert checked >= 10 and len(sessions) >= 5


@pytest.mark.parametrize("processes", [False, True], ids=["local", "processes2"])
def test_mixed_example_keeps_chat_agent_and_plain_http_apart(tmp_path, processes):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(EXAMPLES / "mixed.py", "-u", "10", "-r", "10", "-t", "8s", "--stop-timeout", "5",
                        "--host", sim.url, "--report-dir", str(report_dir), "--raw-log", processes=processes)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    by_class = check_classes(report, rows, {"Chat", "Agent"})  # Models is not an LLM user
    assert set(by_class["Chat"]["engines"]["openai"]["labels"]) == {"chat:short", "chat:long"}
    assert set(by_class["Agent"]["engines"]["openai"]["labels"]) <= {"turn1", "turnN", "after_tool"}
    assert by_class["Chat"]["requests"] > by_class["Agent"]["requests"]  # weight 3 to 1, no think time
    kinds = {name: c["kind"] for name, c in report["manifest"]["user_classes"].items()}
    assert kinds == {"Chat": "llm", "Agent": "scenario", "Models": "locust"}
    assert report["manifest"]["user_classes"]["Agent"]["scenario"] == "agent-multiturn"
    assert report["manifest"]["slos"] == {"ttft_ms": 1000.0, "tpot_ms": 60.0}  # the agent scenario's
    assert "GET" in proc.stdout + proc.stderr and "/v1/models" in proc.stdout + proc.stderr
    html = (report_dir / "report.html").read_text()
    assert "Per user class" in html and "<td>Chat</td>" in html and "<td>Agent</td>" in html
    if processes:
        assert len(workers_of(rows)) == 2


def test_mixed_example_with_separate_master_and_worker_processes(tmp_path):
    report_dir, port = tmp_path / "r", str(free_port())
    common = [sys.executable, "-m", "locust", "-f", str(EXAMPLES / "mixed.py")]
    with sim_process("--profile", "fast") as sim:
        workers = [subprocess.Popen([*common, "--worker", "--master-host", "127.0.0.1", "--master-port", port],
                                    cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(2)]  # fmt: skip
        master = None
        try:
            master = subprocess.run([*common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
                                     "--expect-workers", "2", "--headless", "--no-console-table", "-u", "10", "-r", "10",
                                     "-t", "8s", "--stop-timeout", "5", "--host", sim.url,
                                     "--report-dir", str(report_dir), "--raw-log"],
                                    cwd=REPO, capture_output=True, text=True, timeout=150)  # fmt: skip
        finally:
            for w in workers:  # the master tells them to quit; if it failed, they are stopped here
                if master is None or master.returncode != 0:
                    w.kill()
                w.wait(30)
    assert master.returncode == 0, master.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    check_classes(report, rows, {"Chat", "Agent"})
    assert len(workers_of(rows)) == 2 and report["workers"]["count"] == 2


def test_scenario_classes_on_their_own_targets_with_exact_open_loop_shares(tmp_path):
    """Two ScenarioUser classes, each its own scenario and target, over two workers: each
    worker's scheduled sends of the open-loop scenario are exactly its share of that
    scenario's arrival process (arrivals w, w + 2, ... of the seeded schedule)."""
    report_dir = tmp_path / "r"
    with sim_process("--serve", "openai:0:profile=fast", "--serve", "openai:0:profile=fast") as sim:
        fast, big = sim.urls
        proc = run_file(HERE / "two_scenarios.py", "-u", "12", "-r", "12", "-t", "8s", "--stop-timeout", "5",
                        "--target", f"fast={fast}", "--target", f"big={big}",
                        "--report-dir", str(report_dir), "--raw-log", processes=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    by_class = check_classes(report, rows, {"Scheduled", "BackToBack"})
    assert set(by_class["Scheduled"]["engines"]) == {"fast"} and set(by_class["BackToBack"]["engines"]) == {
        "big"
    }
    assert {r["label"] for r in rows if r["user_class"] == "BackToBack"} <= {"short", "long"}
    # fixed_count = 2, closed loop: never more than two of its requests at once, and two at times.
    assert max_in_flight([r for r in rows if r["user_class"] == "BackToBack"]) == 2
    assert report["manifest"]["user_classes"]["BackToBack"]["fixed_count"] == 2
    assert report["conservation"]["dropped"] == 0
    from loadkit.workload import load_scenario

    scenario = load_scenario(SCENARIOS / "open_poisson.toml")
    endless = arrival_offsets("poisson", stages_from_spec(scenario.arrival), scenario.seed)
    offsets = [t for t, _ in itertools.islice(endless, 2_000)]  # 100 s at 20/s: more than the run
    scheduled = [r for r in rows if r["user_class"] == "Scheduled"]
    assert all(r["t_sched_ns"] is not None for r in scheduled)
    assert all(r["t_sched_ns"] is None for r in rows if r["user_class"] == "BackToBack")
    # Locust deals users to workers by class; the scenario is dealt among the workers running
    # its users (here often one: then that one sends the whole schedule, nothing is dropped).
    running = sorted({r["worker"] for r in scheduled})
    assert report["manifest"]["open_loop_shares"] == {"open-poisson": {"workers": len(running), "of": 2}}
    for i, worker in enumerate(running):
        mine = sorted(r["t_sched_ns"] for r in scheduled if r["worker"] == worker)
        share = offsets[i :: len(running)][: len(mine)]
        assert len(mine) >= 100 // len(running)
        gaps = [b - mine[0] for b in mine]
        want = [round((s - share[0]) * 1e9) for s in share]
        assert all(abs(g - w) <= 2 for g, w in zip(gaps, want, strict=True)), worker
    assert len(scheduled) == pytest.approx(20 * 8, rel=0.3)  # the asked 20/s over the 8 s run, not half


def test_tags_select_the_scenario_task_by_the_scenario_name(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(EXAMPLES / "mixed.py", "Agent", "Chat", "--tags", "agent-multiturn", "short",
                        "-u", "6", "-r", "6", "-t", "6s", "--stop-timeout", "5", "--host", sim.url,
                        "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    check_classes(report, rows, {"Chat", "Agent"})
    assert {r["label"] for r in rows if r["user_class"] == "Chat"} == {"chat:short"}  # "long" filtered out
    assert {r["label"] for r in rows if r["user_class"] == "Agent"} & {"turn1", "turnN"}


@pytest.mark.parametrize("processes", [False, True], ids=["local", "processes2"])
def test_a_locustfile_shape_makes_each_step_a_stage(tmp_path, processes):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(HERE / "shaped.py", "--stop-timeout", "5", "--host", sim.url,
                        "--scenario", str(SCENARIOS / "closed_small.toml"), "--report-dir", str(report_dir),
                        "--raw-log", processes=processes)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    check_classes(report, rows, {"Ask", "Scenario"})
    shape = report["manifest"]["shape"]
    assert shape["class"] == "ThreeSteps"
    assert [(s["name"], s["level"]) for s in shape["steps"]] == [("step1", 2), ("step2", 4), ("step3", 6)]
    assert all(2.0 <= s["duration_s"] <= 4.5 for s in shape["steps"]), shape["steps"]
    stages = report["stages"]["openai"]["stages"]
    assert [s["name"] for s in stages] == ["step1", "step2", "step3"]
    sent = {s["name"]: s["stats"]["requests"] for s in stages}
    by_stage: dict[str, int] = defaultdict(int)
    for r in rows:
        by_stage[r["stage"]] += 1
    assert set(by_stage) == {"step1", "step2", "step3"} and dict(by_stage) == sent
    assert sent["step3"] > sent["step1"]  # three times the users
    if processes:
        assert len(workers_of(rows)) == 2


def test_a_shape_beside_scenario_stages_is_refused_with_one_line(tmp_path):
    proc = run_file(HERE / "shape_with_stages.py", "--host", "http://127.0.0.1:9", "--skip-reachability-check",
                    "--scenario", str(SCENARIOS / "open_poisson_staged.toml"), "--report-dir", str(tmp_path),
                    timeout=60)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "load shape Ramp sets the users over time" in proc.stderr and "Traceback" not in proc.stderr


def test_examples_use_only_the_public_names():
    for path in sorted(EXAMPLES.glob("*.py")):
        text = path.read_text()
        assert "loadkit.locust" not in text or path.name == "llm.py", path
        assert "loadkit.glue" not in text, path  # the deprecated path (docs/api/public.md)
        if path.name != "llm.py":
            assert "from loadkit import" in text, path
