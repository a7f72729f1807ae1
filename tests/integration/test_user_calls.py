"""The user API in real runs (locustfiles/user_calls.py): what a call sends reaches the server;
a call that can never be sent stops the run with one line; ``self.client`` talks to the target
its class names."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import check_conservation, load_report, raw_records
from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.strict_server import StrictOpenAI
from tests.integration.test_locustfiles import run_file

pytestmark = pytest.mark.integration

CALLS = Path(__file__).resolve().parent / "locustfiles" / "user_calls.py"


def test_keyword_and_extra_body_fields_reach_the_server(tmp_path):
    server = StrictOpenAI()
    with ScriptedServer(server) as srv:
        proc = run_file(CALLS, "-u", "2", "-r", "2", "-t", "2s", "--host", srv.url,
                        "--report-dir", str(tmp_path / "r"), env={"LOADKIT_TEST_CALL": "fields"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_conservation(tmp_path / "r")
    # The task's requests (the pre-flight's "Say hello." goes first).
    bodies = [p.body for p in server.posts() if p.body["messages"][-1]["content"] == "hi"]
    assert bodies and all(b["temperature"] == 0 and b["top_k"] == 3 and b["max_tokens"] == 4 for b in bodies)


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (
            "typo",
            "chat() got an unexpected keyword argument 'max_token' (did you mean 'max_tokens'?); it accepts "
            "max_tokens, label, exact_output, temperature,",
        ),
        ("dict", "chat(messages=...): expected a list of message dicts or a str, got one dict"),
    ],
)
def test_a_call_that_cannot_be_sent_stops_the_run_with_one_line(tmp_path, call, says):
    server = StrictOpenAI()
    with ScriptedServer(server) as srv:
        proc = run_file(CALLS, "-u", "4", "-r", "4", "-t", "5s", "--host", srv.url,
                        "--report-dir", str(tmp_path / "r"), env={"LOADKIT_TEST_CALL": call})  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert says in proc.stderr
    # Locust's one traceback shows the task's line; the run stopped before another loop.
    assert proc.stderr.count("Traceback") == 1, proc.stderr[-3000:]
    assert "user_calls.py" in proc.stderr
    assert [p.body["messages"][-1]["content"] for p in server.posts()] == [
        "Say hello."
    ]  # the pre-flight only
    report = load_report(tmp_path / "r")
    assert any(says in r and r.startswith("user class Calls: ") for r in report["invalid_reasons"]), report[
        "invalid_reasons"
    ]


def test_self_client_talks_to_the_target_its_class_names(tmp_path):
    with sim_process("--profile", "fast") as fast, sim_process("--profile", "big") as big:
        proc = run_file(CALLS, "-u", "2", "-r", "2", "-t", "3s", "--target", f"fast={fast.url}",
                        "--target", f"big={big.url}", "--report-dir", str(tmp_path / "r"), "--raw-log",
                        env={"LOADKIT_TEST_CALL": "client"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_conservation(tmp_path / "r")
    rows = raw_records(tmp_path / "r")
    assert rows and {(r["engine"], r["label"]) for r in rows} == {("big", "client:sim-70b")}
