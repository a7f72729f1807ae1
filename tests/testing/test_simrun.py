"""loadkit.testing.simrun on a built-in family: the check passes on a true run and fails a lie,
and it waits for the truth lines of the measured requests, not for a count of lines."""

import copy
import time

import pytest

from loadkit.sim.testing import SimHandle
from loadkit.testing.simrun import SimRun, run_against_sim

pytestmark = pytest.mark.integration


def test_vllm_run_matches_truth_and_a_tampered_log_fails(tmp_path, monkeypatch):
    # The simulator flushes its truth log every 0.5 s: the newest line can reach the file after
    # the run has ended. Shown 1 s late here (the pre-flight request's line is the oldest, so
    # the newest is a measured request's), a count of lines is reached without it.
    read, since = SimHandle.truth_records, []

    def newest_line_late(self):
        since[:] = since or [time.monotonic()]
        records = read(self)
        return records[:-1] if records and time.monotonic() - since[0] < 1.0 else records

    monkeypatch.setattr(SimHandle, "truth_records", newest_line_late)
    run = run_against_sim(tmp_path, "openai", requests=12, users=3)
    lateness = run.check_against_truth()
    assert len(lateness) == 12 and all(lag >= 0 for lag in lateness)
    tampered = SimRun(run.proc, run.report, copy.deepcopy(run.rows), run.truth)
    tampered.rows[0]["event_t_ns"][0] = run.truth[run.rows[0]["request_id"]]["t_token_ns"][0] - 1
    with pytest.raises(AssertionError, match="before the server wrote it"):
        tampered.check_against_truth()
