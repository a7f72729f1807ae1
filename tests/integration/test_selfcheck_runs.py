"""Real short Locust runs: the self-check stays quiet on easy runs, and its verdict agrees
with the simulator's truth log (not flagged ⇒ timestamps within 1 ms at p99)."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from loadkit.selfcheck.verdict import COALESCED_LIMIT_PCT
from loadkit.sim.testing import sim_process
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records, truth_for

pytestmark = pytest.mark.integration
# As root, the Locust process runs SCHED_FIFO: on this shared machine other jobs otherwise
# starve it (a true warning, cause "starved"), and a quiet machine is what is being emulated.
# The simulator stays at normal priority, so it still falls behind and writes events back
# to back now and then: the server-side coalescing that used to raise false alarms.
RT = ["chrt", "-f", "10"] if os.geteuid() == 0 and shutil.which("chrt") else []


def timing_errors(rows: list[dict], truth: dict[str, dict]) -> tuple[np.ndarray, np.ndarray]:
    """Each ok request's TTFT error and its ITL errors (ns) against the server's write times."""
    ttft, itl = [], []
    for r in rows:
        if r["outcome"] != "ok":
            continue
        seen, sent = np.asarray(r["event_t_ns"]), np.asarray(truth[r["request_id"]]["t_token_ns"])
        assert len(seen) == len(sent)
        ttft.append(seen[0] - sent[0])
        itl.append(np.abs(np.diff(seen) - np.diff(sent)))
    return np.asarray(ttft), np.concatenate(itl)


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
    ttft, itl = timing_errors(raw_records(report_dir), truth)
    ttft_p99, itl_p99 = float(np.percentile(ttft, 99)) / 1e6, float(np.percentile(itl, 99)) / 1e6
    if not RT and saturation is not None and saturation["causes"] == ["starved"]:
        # The shared machine took the CPU from this run: a true warning, not a false alarm.
        pytest.skip(f"client starved (TTFT / ITL error p99 {ttft_p99:.3f} / {itl_p99:.3f} ms): {said[0]}")
    assert said == [] and saturation is None, (
        said,
        f"truth: TTFT / ITL error p99 {ttft_p99:.3f} / {itl_p99:.3f} ms",
    )
    assert health["windows"] >= 3 and health["kernel_stamps"] is True and health["lag_limit_ms"] == 20.0
    # Not flagged, so under 1 % of the timestamps are off by over 1 ms (the verdict's read bound),
    # which is what keeps a p99 right. Counted over all of them: with one user the TTFTs are a few
    # dozen and one of them is the p99 (CI once had one at 1.006 ms, its ITL p99 0.13 ms); how
    # late the server's write left after its stamp on a shared machine is not the client's.
    errors = np.concatenate([ttft, itl])
    off = float(np.mean(errors > 1_000_000)) * 100
    assert off < 1.0 and float(np.median(ttft)) < 500_000, (off, ttft_p99, itl_p99, health)


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


def write_times(rows: list[dict], truth: dict[str, dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per server write: each ok request's TTFT error, each ITL error and the server's write time
    of that ITL sample's later event (ns). The write holding the reasoning's end and the
    answer's start is two events to the client and one stamp in the truth log (its
    ``t_first_answer_ns``); the client's reasoning part of it is left out."""
    ttft, itl, at = [], [], []
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
        at.append(sent[1:])
    return np.asarray(ttft), np.concatenate(itl), np.concatenate(at)


def worst_window_off_pct(errors: np.ndarray, at: np.ndarray, window_s: float = 5.0) -> float:
    """The largest share (%) of ITL samples off by over 1 ms in any ``window_s`` span of the
    run (1 s steps): what the truth says of the self-check's windows, wherever they fell."""
    second = ((at - at.min()) // 1_000_000_000).astype(int)
    total = np.bincount(second)
    off = np.bincount(second, weights=errors > 1_000_000, minlength=len(total))
    k = max(1, int(window_s))
    totals = np.convolve(total, np.ones(k), mode="valid") if len(total) >= k else np.array([total.sum()])
    offs = np.convolve(off, np.ones(k), mode="valid") if len(off) >= k else np.array([off.sum()])
    return float(np.max(offs / np.maximum(totals, 1))) * 100


@pytest.mark.slow
def test_many_streams_whose_reads_wait_by_chance_are_not_flagged(tmp_path):
    """200 closed-loop streams on 20 ms steps, the simulator writing each request's reasoning
    and answer parts together (one read, two token events, a few % of all events) and a step's
    200 events back to back, so up to a quarter of the client's reads wait over 1 ms while it
    works through them. Those coalesced reads wait as often as any read: the server's, not the
    client's (it said "arrival_lag, cause stall" on such runs, truth error p99 0.05 ms). An
    accurate run (no 5 s span of it with more of its samples off by over 1 ms than the verdict's
    limit) must not be flagged for its token timestamps."""
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
    ttft, itl, at = write_times(raw_records(report_dir), truth)
    ttft_p99, itl_p99 = float(np.percentile(ttft, 99)) / 1e6, float(np.percentile(itl, 99)) / 1e6
    worst = worst_window_off_pct(itl, at)
    figures = (
        f"truth: TTFT / ITL error p99 {ttft_p99:.3f} / {itl_p99:.3f} ms, worst 5 s: {worst:.2f} % "
        f"of ITL samples off by over 1 ms; {health}"
    )
    # The verdict is per window, and a window whose samples really were off beyond its limit is a
    # true flag even when the run's p99 is not (CI once saw a 41 ms loop lag and arrival_lag in a
    # run whose p99 stayed under 1 ms). Only where no window's truth was over it is a flag a false
    # alarm, and that is what this test is for.
    real = ttft_p99 > 1.0 or itl_p99 > 1.0 or worst > COALESCED_LIMIT_PCT
    if real or (saturation is not None and "starved" in saturation["causes"]):
        pytest.skip(f"the shared machine made this client late for real: {figures}")
    # The server's coalescing is always over the limit here; how many reads wait depends on how
    # the simulator's writes and the client's reads interleave on the shared machine (0-28 % of
    # reads over 1 ms in runs here): when they do, chance puts them in the coalesced reads too.
    assert health["max_coalesced_event_pct"] > 2.0, figures
    assert saturation is None or "arrival_lag" not in saturation["reasons"], (saturation, figures)
    assert health["max_client_coalesced_event_pct"] < 0.75, figures
