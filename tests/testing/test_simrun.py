"""loadkit.testing.simrun on a built-in family: the check passes on a true run and fails a lie."""

import copy

import pytest

from loadkit.testing.simrun import SimRun, run_against_sim

pytestmark = pytest.mark.integration


def test_vllm_run_matches_truth_and_a_tampered_log_fails(tmp_path):
    run = run_against_sim(tmp_path, "openai", requests=12, users=3)
    lateness = run.check_against_truth()
    assert len(lateness) == 12 and all(lag >= 0 for lag in lateness)
    tampered = SimRun(run.proc, run.report, copy.deepcopy(run.rows), run.truth)
    tampered.rows[0]["event_t_ns"][0] = run.truth[run.rows[0]["request_id"]]["t_token_ns"][0] - 1
    with pytest.raises(AssertionError, match="before the server wrote it"):
        tampered.check_against_truth()


def test_the_run_is_read_from_the_directory_it_wrote_not_an_earlier_one(tmp_path):
    from loadkit.testing.simrun import _written_dir

    log = (f"[t] vm/WARNING/loadkit: loadkit: --report-dir {tmp_path} holds an earlier run: this run's reports go "
           f"to {tmp_path}-2\n[t] vm/INFO/locust.main: Shutting down (exit code 0)\n")  # fmt: skip
    assert _written_dir(log, tmp_path) == type(tmp_path)(f"{tmp_path}-2")
    assert _written_dir("no such line\n", tmp_path) == tmp_path
