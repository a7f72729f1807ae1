"""Embeddings and rerank in real Locust runs against the simulator, each family answering in its
engine's shape: conservation holds, and every request agrees with the simulator's truth log
(kind, items, input tokens, the answer read after it was written); under faults each request's
outcome is the one its fault makes (loadkit/testing/simrun.py, tests/integration/locustfiles/kinds.py)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from loadkit.sim.testing import sim_process
from loadkit.testing.simrun import SimRun
from tests.helpers.runs import check_conservation, raw_records
from tests.integration.test_locustfiles import run_file

pytestmark = pytest.mark.integration

KINDS = Path(__file__).resolve().parent / "locustfiles" / "kinds.py"
TEXTS = ["a short text", "a somewhat longer text to embed or rank " * 3, "third text here", "w " * 60]


def _run(tmp_path: Path, family: str, engine: str, kind: str, top_n: int | None = None,
         sim_args: tuple[str, ...] = (), requests: int = 24, run_args: tuple[str, ...] = ()) -> SimRun:  # fmt: skip
    env = {"LOADKIT_TEST_INPUTS": json.dumps(TEXTS), "LOADKIT_TEST_KIND": kind}
    if top_n is not None:
        env["LOADKIT_TEST_TOP_N"] = str(top_n)
    report_dir = tmp_path / "r"
    with sim_process("--engine", family, "--profile", "fast", "--seed", "3", *sim_args) as sim:
        proc = run_file(KINDS, "-u", "3", "-r", "3", "-t", "30s", "--host", sim.url, "--engine", engine,
                        "--max-requests", str(requests), "--raw-log", "--report-dir", str(report_dir),
                        "--scrape-interval", "0", "--exit-code-on-error", "0", *run_args, env=env)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = raw_records(report_dir)
        truth = sim.wait_truth_for({r["request_id"] for r in rows}, 10)
    report = orjson.loads((report_dir / "report.json").read_bytes())
    check_conservation(report_dir)
    return SimRun(proc, report, rows, truth)


@pytest.mark.parametrize(
    ("family", "engine", "kind", "top_n"),
    [
        ("openai", "vllm", "embeddings", None),
        ("openai", "vllm", "rerank", 2),
        ("tgi", "tgi", "rerank", 2),  # TEI's /rerank: every document scored
        ("ollama", "ollama", "embeddings", None),
        ("sglang", "sglang", "rerank", None),
    ],
)
def test_every_request_agrees_with_the_truth(tmp_path, family, engine, kind, top_n):
    run = _run(tmp_path, family, engine, kind, top_n)
    run.check_against_truth(median_lateness_ms=5.0)
    assert {r["outcome"] for r in run.rows} == {"ok"} and len(run.rows) == 24
    for r in run.rows:
        due = r["n_items"] if top_n is None or family == "tgi" else min(top_n, r["n_items"])
        assert (r["kind"], r["end"], r["n_items_returned"]) == (kind, "body", due)
        assert r["n_in"] == run.truth[r["request_id"]]["prompt_tokens"]


def test_faults_on_bodies_are_the_outcomes_the_truth_says(tmp_path):
    run = _run(tmp_path, "openai", "vllm", "embeddings", requests=40,
               sim_args=("--fault", "error_event=0.15", "--fault", "malformed=0.15", "--fault", "close_early=0.15",
                         "--fault", "http_503=0.1"),
               # over half the requests fail on purpose, and quickly: validity and backoff are not the point
               run_args=("--max-failed-share", "100", "--no-backoff"))  # fmt: skip
    expected = {None: "ok", "error_event": "in_band_error", "malformed": "malformed_stream",
                "close_early": "disconnected", "http_503": "http_error:503"}  # fmt: skip
    seen = set()
    for r in run.rows:
        fault = run.truth[r["request_id"]]["fault"]
        assert r["outcome"] == expected[fault], (r["outcome"], fault, r["error"])
        seen.add(fault)
    assert len(seen) >= 4, seen  # most faults struck in 40 requests (seeded)
    run.check_against_truth(median_lateness_ms=5.0)
