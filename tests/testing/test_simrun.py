"""loadkit.testing.simrun on a built-in family: the check passes on a true run and fails a lie
(a tampered time, tokens miscounted per event by a real adapter), and it waits for the truth
lines of the measured requests, not for a count of lines."""

import copy
import os
import time
from pathlib import Path

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
    # Up to 3 tokens per decode step and event: the per-event counts are worth comparing, and
    # vLLM's running usage (continuous_usage_stats) states them exactly.
    run = run_against_sim(tmp_path, "openai", requests=12, users=3, sim_args=["--spec-tokens", "3"])
    lateness = run.check_against_truth(exact_event_tokens=True)
    assert len(lateness) == 12 and all(lag >= 0 for lag in lateness)
    assert any(k > 1 for r in run.rows for k in r["event_tokens"]), "no event carried several tokens"
    tampered = SimRun(run.proc, run.report, copy.deepcopy(run.rows), run.truth)
    tampered.rows[0]["event_t_ns"][0] = run.truth[run.rows[0]["request_id"]]["t_token_ns"][0] - 1
    with pytest.raises(AssertionError, match="before the server wrote it"):
        tampered.check_against_truth()


MISCOUNTING = '''
"""vLLM's adapter, with every second token event counted as two (n_out still from usage)."""
import dataclasses

from loadkit import hookimpl
from loadkit.engines.base import StreamParser
from loadkit.engines.vllm import VLLMAdapter


class Miscounting(VLLMAdapter):
    name = "miscount"
    description = "vLLM, every second token event counted as two"

    def new_parser(self):
        inner = super().new_parser()

        class P(StreamParser):
            seen = 0

            def parse(self, data, event=None):
                te = inner.parse(data, event)
                if te is not None and (te.tokens > 0 or te.text or te.reasoning_text):
                    self.seen += 1
                    if self.seen % 2 == 0:
                        return dataclasses.replace(te, tokens=2)
                return te

        return P()


@hookimpl
def loadkit_register_engines(register):
    register(Miscounting)
'''


def install_miscounting(site: Path) -> dict[str, str]:
    """A real plugin distribution (a .dist-info with a loadkit entry point) under ``site``."""
    (site / "miscount_plugin.py").write_text(MISCOUNTING)
    info = site / "loadkit_miscount-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: loadkit-miscount\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[loadkit]\nmiscount = miscount_plugin\n")
    return {
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p),
        "LOADKIT_LOAD_PLUGINS": "miscount",
    }


def test_tokens_miscounted_per_event_fail_the_check(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    for key, value in install_miscounting(site).items():
        monkeypatch.setenv(key, value)
    run = run_against_sim(tmp_path / "run", "openai", requests=8, users=2, run_args=["--engine", "miscount"])
    ok = run.outcome("ok")
    assert ok and all(r["engine"] == "miscount" for r in ok), {r["engine"] for r in run.rows}
    # Totals agree (n_out is the server's usage) and every event is where and when it was
    # written: only the count per event is wrong.
    assert all(
        r["n_out_source"] == "usage" and r["n_out"] == run.truth[r["request_id"]]["completion_tokens"]
        for r in ok
    )
    with pytest.raises(AssertionError, match="tokens per event differ from the server's writes"):
        run.check_against_truth()


def test_the_run_is_read_from_the_directory_it_wrote_not_an_earlier_one(tmp_path):
    from loadkit.testing.simrun import _written_dir

    log = (f"[t] vm/WARNING/loadkit: loadkit: --report-dir {tmp_path} holds an earlier run: this run's reports go "
           f"to {tmp_path}-2\n[t] vm/INFO/locust.main: Shutting down (exit code 0)\n")  # fmt: skip
    assert _written_dir(log, tmp_path) == type(tmp_path)(f"{tmp_path}-2")
    assert _written_dir("no such line\n", tmp_path) == tmp_path
