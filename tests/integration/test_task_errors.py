"""Exceptions in the user's own task (issue #32, item 1), in real headless Locust runs against
the simulator: a task that raises after one ok turn of its session. report.json counts them per
class and kind (task_errors) with the first traceback, the sessions they broke end as
task_error at the turn never sent, report.html and the console say so, and the exit code is
Locust's --exit-code-on-error with a line naming why (no request failed). Locally and with
--processes 2 (the counts merge from the workers' snapshots). Conservation is checked."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import check_conservation, raw_records
from tests.integration.test_locustfiles import HERE, run_file

pytestmark = pytest.mark.integration

EPISODES = 6  # --max-requests: each episode sends exactly one request, turn 1, then raises


@pytest.mark.parametrize("processes", [False, True], ids=["local", "processes2"])
def test_a_task_that_raises_is_counted_shown_and_sets_the_exit_code(tmp_path, processes):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_file(HERE / "task_raises.py", "-u", "2", "-r", "2", "-t", "30s", "--stop-timeout", "5",
                        "--max-requests", str(EPISODES), "--host", sim.url, "--report-dir", str(report_dir),
                        "--raw-log", processes=processes)  # fmt: skip
    out = proc.stdout + proc.stderr
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert (
        len(rows) == EPISODES and {r["outcome"] for r in rows} == {"ok"} and {r["turn"] for r in rows} == {1}
    )
    assert report["valid"], report["invalid_reasons"]
    assert report["engines"]["openai"]["failures"] == 0

    # report.json: per class and kind, counts that add up to one exception per episode.
    errors = report["task_errors"]
    assert set(errors) == {"Breaks"}
    breaks = errors["Breaks"]
    assert breaks["count"] == EPISODES and breaks["other"] == 0
    kinds = {(e["type"], e["message"]): e for e in breaks["errors"]}
    assert set(kinds) == {("ValueError", "the reply named no tool"), ("KeyError", "'tool'")}
    assert sum(e["count"] for e in kinds.values()) == EPISODES
    value_error = kinds[("ValueError", "the reply named no tool")]
    assert value_error["where"].startswith("task_raises.py:") and value_error["where"].endswith(" in episode")
    assert 'raise ValueError("the reply named no tool")' in value_error["traceback"]
    assert value_error["traceback"].rstrip().endswith("ValueError: the reply named no tool")
    assert (
        min(r["t_send_ns"] for r in rows) > 0
        and value_error["first_unix"] > report["manifest"]["started_unix"]
    )

    # Each session broke by the task's exception, at turn 2 (turn 1 was ok; turn 2 never sent).
    # The user that asked for one more episode than --max-requests allows ends it cancelled
    # before its turn 1 went out (a StopUser from the budget, not a task error).
    sessions = report["sessions"]["openai"]
    assert sessions["broken_by"]["task_error"] == EPISODES and sessions["completed"] == 0
    assert sessions["broken_at_turn"]["2"] == EPISODES
    assert set(sessions["broken_by"]) <= {"task_error", "cancelled"}
    assert sessions["turns"]["1"]["ok"] == EPISODES and "2" not in sessions["turns"]

    # The exit code is Locust's --exit-code-on-error (1), and loadkit says why.
    assert proc.returncode == 1, out[-3000:]
    assert (f"exit code 1 (Locust's --exit-code-on-error): the run is valid, but {EPISODES} exceptions were raised "
            "in the locustfile's tasks (Breaks: ") in out  # fmt: skip
    assert "; no request failed" in out
    assert "exceptions raised in the locustfile's tasks (6;" in out
    assert "ValueError ×" in out and "the reply named no tool (at task_raises.py:" in out

    # report.html: the header line, the section and the first traceback.
    html = (report_dir / "report.html").read_text()
    assert 'id="task-errors"' in html and 'href="#task-errors"' in html
    assert f"{EPISODES} exceptions were raised in the locustfile&#39;s tasks (Breaks: " in html
    assert "the reply named no tool" in html and "KeyError: &#39;tool&#39;" in html
    assert "Breaks: ValueError: first traceback" in html
