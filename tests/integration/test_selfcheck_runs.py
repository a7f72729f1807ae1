"""Real short Locust runs: the self-check stays quiet on easy runs, and its verdict agrees
with the simulator's truth log (not flagged ⇒ timestamps within 1 ms at p99)."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from loadkit.sim.testing import sim_process
from tests.integration.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records, truth_for

pytestmark = pytest.mark.integration
# As root, the Locust process runs SCHED_FIFO: on this shared machine other jobs otherwise
# starve it (a true warning, cause "starved"), and a quiet machine is what is being emulated.
# The simulator stays at normal priority, so it still falls behind and writes events back
# to back now and then: the server-side coalescing that used to raise false alarms.
RT = ["chrt", "-f", "10"] if os.geteuid() == 0 and shutil.which("chrt") else []


def timing_errors_ms(rows: list[dict], truth: dict[str, dict]) -> tuple[float, float]:
    """TTFT and ITL error p99 (ms) of the ok requests against the server's write times."""
    ttft, itl = [], []
    for r in rows:
        if r["outcome"] != "ok":
            continue
        seen, sent = np.asarray(r["event_t_ns"]), np.asarray(truth[r["request_id"]]["t_token_ns"])
        assert len(seen) == len(sent)
        ttft.append(seen[0] - sent[0])
        itl.append(np.abs(np.diff(seen) - np.diff(sent)))
    return float(np.percentile(ttft, 99)) / 1e6, float(np.percentile(np.concatenate(itl), 99)) / 1e6


@pytest.mark.parametrize("users", [1, 4])
def test_a_small_run_prints_no_saturation_warning(tmp_path, users):
    """1 user (one request at a time, mostly idle) and 4 (a web-UI-sized run) at a few % of
    a core: no "client saturated" in the report, and the timestamps really are right."""
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "11") as sim:
        cmd = RT + locust_cmd(
            "--headless", "-u", str(users), "-r", str(users), "-t", "9s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "openai", "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
        )  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    manifest = report["manifest"]
    saturation, health = manifest["client_saturation"], manifest["client_selfcheck"]
    said = [w for w in report["warnings"] if w.startswith("client saturat")]
    ttft_p99, itl_p99 = timing_errors_ms(raw_records(report_dir), truth)
    if not RT and saturation is not None and saturation["causes"] == ["starved"]:
        # The shared machine took the CPU from this run: a true warning, not a false alarm.
        pytest.skip(f"client starved (TTFT / ITL error p99 {ttft_p99:.3f} / {itl_p99:.3f} ms): {said[0]}")
    assert said == [] and saturation is None, (
        said,
        f"truth: TTFT / ITL error p99 {ttft_p99:.3f} / {itl_p99:.3f} ms",
    )
    assert health["windows"] >= 3 and health["kernel_stamps"] is True and health["lag_limit_ms"] == 20.0
    assert ttft_p99 <= 1.0 and itl_p99 <= 1.0, (ttft_p99, itl_p99, health)


MANY_STREAMS = """schema = "loadkit.scenario/1"
name = "many-streams"
seed = 1
duration_s = 3600

[arrival]
model = "closed"
users = 200

[prompt]
tokenizer = "approx"
api = "completions"

[[parts]]
name = "fixed"
input = { dist = "fixed", value = 16 }
output = { dist = "fixed", value = 64 }
"""


def write_times_ms(rows: list[dict], truth: dict[str, dict]) -> tuple[float, float]:
    """TTFT and ITL error p99 (ms) per server write: the write holding the reasoning's end and
    the answer's start is two events to the client and one stamp in the truth log (its
    ``t_first_answer_ns``); the client's reasoning part of it is left out."""
    ttft, itl = [], []
    for r in rows:
        if r["outcome"] != "ok":
            continue
        t = truth[r["request_id"]]
        seen, sent = np.asarray(r["event_t_ns"]), np.asarray(t["t_token_ns"])
        if len(seen) == len(sent) + 1:
            seen = np.delete(seen, t["t_token_ns"].index(t["t_first_answer_ns"]))
        assert len(seen) == len(sent), r["request_id"]
        ttft.append(seen[0] - sent[0])
        itl.append(np.abs(np.diff(seen) - np.diff(sent)))
    return float(np.percentile(ttft, 99)) / 1e6, float(np.percentile(np.concatenate(itl), 99)) / 1e6


@pytest.mark.slow
def test_many_streams_whose_reads_wait_by_chance_are_not_flagged(tmp_path):
    """200 closed-loop streams on 20 ms steps, the simulator writing each request's reasoning
    and answer parts together (one read, two token events, a few % of all events) and a step's
    200 events back to back, so up to a quarter of the client's reads wait over 1 ms while it
    works through them. Those coalesced reads wait as often as any read: the server's, not the
    client's (it said "arrival_lag, cause stall" on such runs, truth error p99 0.05 ms). An
    accurate run (truth p99 within 1 ms) must not be flagged for its token timestamps."""
    scenario, report_dir = tmp_path / "many.toml", tmp_path / "r"
    scenario.write_text(MANY_STREAMS)
    sim_args = ["--profile", "fast", "--decode-base-ms", "20", "--decode-per-seq-ms", "0",
                "--kv-read-ms-per-1k-tokens", "0", "--prefill-us-per-token", "0", "--max-num-seqs", "4096",
                "--max-num-batched-tokens", "65536", "--output-us-per-event", "0", "--spec-tokens", "4",
                "--reasoning-mean-tokens", "16", "--reasoning-format", "tags", "--seed", "7"]  # fmt: skip
    with sim_process(*sim_args) as sim:
        cmd = RT + locust_cmd(
            "--headless", "-u", "200", "-r", "200", "-t", "16s", "--stop-timeout", "10", "--host", sim.url,
            "--scenario", str(scenario), "--api", "completions", "--only-summary", "--no-console-table",
            "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
        )  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=REPO)
        truth = truth_for(sim, report_dir, timeout_s=20)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = check_conservation(report_dir)["manifest"]
    saturation, health = manifest["client_saturation"], manifest["client_selfcheck"]
    ttft_p99, itl_p99 = write_times_ms(raw_records(report_dir), truth)
    figures = f"truth: TTFT / ITL error p99 {ttft_p99:.3f} / {itl_p99:.3f} ms; {health}"
    if ttft_p99 > 1.0 or itl_p99 > 1.0 or (saturation is not None and "starved" in saturation["causes"]):
        pytest.skip(f"the shared machine made this client late for real: {figures}")
    # The server's coalescing is always over the limit here; how many reads wait depends on how
    # the simulator's writes and the client's reads interleave on the shared machine (0-28 % of
    # reads over 1 ms in runs here): when they do, chance puts them in the coalesced reads too.
    assert health["max_coalesced_event_pct"] > 2.0, figures
    assert saturation is None or "arrival_lag" not in saturation["reasons"], (saturation, figures)
    assert health["max_client_coalesced_event_pct"] < 0.75, figures
