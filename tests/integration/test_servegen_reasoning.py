"""A real Locust run of the shipped ServeGen reasoning sample (reason/deepseek-r1 chunk-14) against
a reasoning simulator: each request carries its window's expected split and sends it as
x-loadkit-reasoning-tokens, the simulator reasons that long (its truth log agrees per request),
and the realised reasoning share in report.json matches the window's reason_ratio. The run ends
with the conservation check (issue 34).

Before: reason_ratio was ignored; the simulator drew every reply's reasoning from its profile
(a mean of 6 of 24 tokens here, a share near 0.25 where the trace says 0.75)."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.sim.testing import sim_process
from loadkit.workload.paths import PACKAGE_DATA
from tests.helpers.runs import check_conservation, raw_records, run_locust, truth_for
from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.strict_server import CHAT_FIELDS, StrictOpenAI

pytestmark = pytest.mark.integration

TRACE = PACKAGE_DATA / "traces" / "servegen" / "reason-deepseek-r1" / "chunk-14-trace.csv"
# The realised share (Σ reasoning / Σ output tokens) against the window's reason_ratio: the
# sample of ~300 draws moves the mean by ~0.01; the simulator leaves one answer token (ratio 1).
TOLERANCE = 0.03


def window_ratio(start_s: float) -> float:
    """The mean reason_ratio of the dataset window holding start_s, read from the file."""
    from loadkit.workload.servegen import dataset_for, read_lengths

    tables = read_lengths(str(dataset_for(TRACE)))
    assert tables.ratios is not None
    values, probs = tables.ratios[tables.at(start_s)]
    return float(np.dot(values, probs))


def write_scenario(tmp_path):
    scenario = tmp_path / "reasoning.toml"
    scenario.write_text(
        'schema = "loadkit.scenario/1"\nname = "sgr"\nseed = 3\n[arrival]\nmodel = "trace"\n'
        f'[trace]\nformat = "servegen"\npath = "{TRACE}"\nstart_s = 59400\nend_s = 60000\nspeed = 100.0\n'
        "max_input_tokens = 128\nmax_output_tokens = 24\n"
    )
    return scenario


def test_the_realised_reasoning_share_follows_reason_ratio(tmp_path):
    scenario = write_scenario(tmp_path)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "3", "--reasoning-mean-tokens", "6",
                     "--reasoning-dist", "uniform", truth_log=str(tmp_path / "truth.jsonl")) as sim:  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "12", "-r", "12", "-t", "12s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--api", "chat", "--model", "sim-fast",
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) >= 250 and len(ok) == len(rows) and report["conservation"]["dropped"] == 0
    for r in ok:  # the hint went out, and the simulator reasoned exactly that long
        t = truth[r["request_id"]]
        assert t["reasoning_hint"] == r["expected_reasoning_tokens"]
        assert (
            t["reasoning_tokens"] == r["n_reasoning"] == min(r["expected_reasoning_tokens"], r["n_out"] - 1)
        )
    engine = ok[0]["engine"]
    split = report["lengths"]["by_target"][engine]["reasoning"]
    asked = window_ratio(59400)  # 0.751 in chunk-14's 43,200 s window
    print(f"reason_ratio {asked:.3f}: expected share {split['expected_share']:.3f}, "
          f"realised {split['realised_share']:.3f} over {split['measured']} requests")  # fmt: skip
    assert split["requests"] == split["measured"] == len(ok) and split["note"] is None
    assert split["realised_share"] == pytest.approx(asked, abs=TOLERANCE)
    assert split["realised_share"] == pytest.approx(split["expected_share_measured"], abs=0.01)
    assert split["share_error"] == pytest.approx(split["realised_share"] - split["expected_share_measured"])
    pair = report["delivered"]["by_target"][engine]["lengths"]["reasoning_share"]
    assert (
        pair["realised"] == split["realised_share"] and pair["expected"] == split["expected_share_measured"]
    )
    said = [w for w in report["warnings"] if "reason_ratio: " in w]
    assert len(said) == 1 and "a real server decides its own reasoning length" in said[0]
    out = proc.stdout + proc.stderr
    assert f"reasoning {engine}: expected share" in out and "reason_ratio ignored" not in out
    assert "reasoning share expected" in (report_dir / "report.html").read_text()


def test_a_strict_server_that_does_not_reason_takes_the_header_and_is_named(tmp_path):
    """A server refusing unknown body fields still takes every request (the hint is a header);
    it does not reason, so the report says reason_ratio cannot apply to it."""
    server = StrictOpenAI(allowed=CHAT_FIELDS)
    report_dir = tmp_path / "r"
    with ScriptedServer(server) as srv:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "20s", "--stop-timeout", "3", "--host", srv.url,
            "--engine", "vllm", "--max-requests", "20", "--scenario", str(write_scenario(tmp_path)),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    assert report["engines"]["vllm"]["outcomes"] == {"ok": 20}
    run = server.posts()[-20:]  # after the pre-flight's
    assert all(set(p.body) <= CHAT_FIELDS for p in run)
    assert all(int(p.headers["x-loadkit-reasoning-tokens"]) <= p.body["max_tokens"] for p in run)
    split = report["lengths"]["by_target"]["vllm"]["reasoning"]
    assert split["realised_share"] == 0.0 and split["expected_share"] > 0.5
    assert "reason_ratio cannot apply to it" in split["note"]
    assert "reasoning vllm: expected share" in proc.stdout + proc.stderr
