"""Open loop, coordinated omission and sweeps, in real Locust runs against the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, load_report, raw_records, run_locust

pytestmark = pytest.mark.integration


def inter_arrival_stats(rows: list[dict]) -> tuple[float, float]:
    t = np.sort(np.array([r["t_sched_ns"] for r in rows], dtype=np.int64)) / 1e9
    gaps = np.diff(t)
    return (len(t) - 1) / (t[-1] - t[0]), float(gaps.std(ddof=1) / gaps.mean())


@pytest.mark.parametrize("processes", [None, "2"])
def test_realised_poisson_arrivals_match_asked(tmp_path, processes):
    report_dir = tmp_path / "r"
    extra = ["--processes", processes] if processes else []
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", *extra, "-u", "40", "-r", "40", "-t", "10s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(SCENARIOS / "open_poisson.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert all(r["t_sched_ns"] is not None for r in rows)
    rate, cv = inter_arrival_stats(rows)
    # Asked: Poisson at 20 req/s (CV 1). ~200 arrivals: rate within 20%, CV within 0.25.
    assert rate == pytest.approx(20.0, rel=0.2), rate
    assert cv == pytest.approx(1.0, abs=0.25), cv
    assert report["conservation"]["dropped"] == 0
    # The report's delivered section says the same, from the send times of every node merged.
    ((engine, delivered),) = report["delivered"]["by_target"].items()
    row = delivered["stages"]["main"]
    sends = np.sort(np.array([r["t_send_ns"] for r in rows], dtype=np.int64)) / 1e9
    gaps = np.diff(sends)
    assert row["arrivals"] == len(rows) and row["asked"] == {"model": "poisson", "rate": 20.0, "cv": 1.0}
    assert row["realised"]["rate"] == pytest.approx((len(sends) - 1) / (sends[-1] - sends[0]), rel=1e-4)
    assert row["realised"]["cv"] == pytest.approx(gaps.std(ddof=1) / gaps.mean(), rel=1e-3)
    assert row["fit"]["test"] == "ks vs exponential" and row["fit"]["consistent"], row["fit"]
    assert 1 <= row["concurrency"]["peak"] <= 40
    assert delivered["lengths"]["output_tokens"]["asked_mean"] == 8.0
    assert f"delivered {engine}/main: rate" in proc.stdout + proc.stderr
    if processes:
        assert len({r["worker"] for r in rows}) == 2
        # Disjoint shares: no scheduled time is sent twice.
        assert len({r["t_sched_ns"] for r in rows}) == len(rows)


def test_ttft_from_schedule_shows_queueing_closed_loop_ttft_hides(tmp_path):
    report_dir = tmp_path / "r"
    # 4 senders against a 4-sequence server (~90 req/s at most), asked for 200 req/s.
    with sim_process("--profile", "fast", "--max-num-seqs", "4") as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "8s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(SCENARIOS / "open_overload.toml"),
            "--report-dir", str(report_dir), "--raw-log", "--max-schedule-lag", "0",
        )  # fmt: skip
    report = check_conservation(report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = next(iter(report["engines"].values()))
    ttft, from_schedule = section["ttft_ms"]["p50"], section["ttft_sched_ms"]["p50"]
    assert from_schedule > 5 * ttft, (ttft, from_schedule)
    # Every sender was in flight when slots came due: the warning says so, and does not blame
    # the client (which kept time).
    schedule = next(iter(report["manifest"]["schedule"].values()))
    assert schedule["no_free_user"] >= (schedule["late"] + schedule["dropped"]) / 2 > 0, schedule
    behind = [w for w in report["warnings"] if "open-loop schedule fell behind" in w]
    assert behind and "every user was busy (in flight)" in behind[0], report["warnings"]
    assert "more users (-u) are needed" in behind[0]
    assert not any("client was the bottleneck" in w for w in report["warnings"]), report["warnings"]


def test_sweep_finds_saturation_within_one_step(tmp_path):
    report_dir = tmp_path / "r"
    # max_num_seqs = 8: the cost model saturates at 8 concurrent sequences.
    with sim_process("--profile", "default", "--max-num-seqs", "8") as sim:
        proc = run_locust(
            "--headless", "--host", sim.url, "--engine", "vllm", "--stop-timeout", "3",
            "--scenario", str(SCENARIOS / "sweep_closed.toml"), "--report-dir", str(report_dir),
            timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    sweep = report["stages"]["vllm"]
    levels = [row["level"] for row in sweep["stages"]]
    assert levels == [2, 4, 8, 16, 32]
    tput = [row["stats"]["output_tokens_per_s"] for row in sweep["stages"]]
    assert tput[2] > 2.5 * tput[0]  # rising below capacity
    # Past capacity (8 running sequences) throughput plateaus: 16 and 32 users add only what
    # they gain by filling the slots 8 users leave idle between a request's end and the next
    # admission (1-2 steps per 32-token request). Measured: 7-10 % before this wave; 6-20 % on
    # its code (16 users), with 32 at or below 16 -- a shift not yet explained (performance.md,
    # "Open questions"), so the bound is the plateau itself: well under the 2x of 8 -> 16 below
    # capacity, and no further rise from 16 to 32.
    assert max(tput[3], tput[4]) < 1.25 * tput[2], tput
    assert tput[4] < 1.15 * tput[3], tput
    saturation = sweep["analysis"]["saturation"]
    # The rule (gain < 10 %) fires at 16, or at 32 when that gain reaches 10 %; never below capacity.
    assert saturation is not None and saturation["level"] in (8, 16, 32), sweep["analysis"]
    best = sweep["analysis"]["max_load_meeting_slos"]
    assert best is not None and best["level"] in (4, 8)


def test_warmup_is_excluded_from_stats(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "40", "-r", "40", "--stop-timeout", "5", "--warmup", "2",
            "--host", sim.url, "--scenario", str(SCENARIOS / "open_poisson_staged.toml"),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert rows and all(r["stage"] != "warmup" for r in rows)
    stages = report["stages"][next(iter(report["stages"]))]["stages"]
    assert stages[0]["name"] == "warmup" and stages[0]["stats"]["requests"] > 10
    assert [s["name"] for s in stages[1:]] == ["stage1", "stage2"]
    assert load_report(report_dir)["engines"]


def test_unsorted_trace_replays_each_row_at_its_own_time(tmp_path):
    """The issue's case in a real run: rows at 10, 2, 5, 1 s (here /10 by speed); 3 senders. Each
    request carries the lengths of the row whose time it was sent at, and the run warns."""
    rows = [(10, 100, 4), (2, 200, 5), (5, 300, 6), (1, 400, 7), (7, 500, 8), (3, 600, 9)]
    (tmp_path / "t.csv").write_text("ts,inp,out\n" + "".join(f"{t},{i},{o}\n" for t, i, o in rows))
    scenario = tmp_path / "unsorted.toml"
    scenario.write_text(
        'schema = "loadkit.scenario/1"\nname = "unsorted"\nseed = 1\n[arrival]\nmodel = "trace"\n'
        '[prompt]\napi = "completions"\n[trace]\nformat = "lengths"\npath = "t.csv"\n'
        'timestamp_column = "ts"\ninput_column = "inp"\noutput_column = "out"\nspeed = 10.0\n'
    )
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "3", "-r", "3", "-t", "5s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    sent = sorted(raw_records(report_dir), key=lambda r: r["t_sched_ns"])
    assert len(sent) == len(rows)
    by_time = sorted(rows)
    assert [r["n_in_target"] for r in sent] == [i for _, i, _ in by_time]
    assert [r["n_out"] for r in sent] == [o for _, _, o in by_time]  # the simulator writes max_tokens
    gaps_s = np.diff([r["t_sched_ns"] for r in sent]) / 1e9
    assert gaps_s == pytest.approx(np.diff([t for t, _, _ in by_time]) / 10.0, abs=1e-6)
    assert any(
        "5 of 6 rows have a timestamp earlier than a row above them" in w for w in report["warnings"]
    ), report["warnings"]


def test_servegen_windows_replay_at_the_files_per_window_rate(tmp_path):
    """Two adjacent ServeGen windows (0.08 and 0.077 req/s in the file), 100x faster: the
    realised rate of each window, from the send times, is within 5 % of the file's."""
    from loadkit.workload import load_scenario
    from loadkit.workload.paths import PACKAGE_DATA
    from loadkit.workload.servegen import read_windows

    trace = PACKAGE_DATA / "traces" / "servegen" / "language-m-mid" / "chunk-1-trace.csv"
    scenario = tmp_path / "servegen.toml"
    scenario.write_text(
        'schema = "loadkit.scenario/1"\nname = "sg"\nseed = 4\n[arrival]\nmodel = "trace"\n'
        '[prompt]\napi = "completions"\n[trace]\nformat = "servegen"\n'
        f'path = "{trace}"\nstart_s = 81600\nend_s = 82800\nspeed = 100.0\n'
        "max_input_tokens = 256\nmax_output_tokens = 8\n"
    )
    planned = load_scenario(scenario).request_source().trace_arrival_times_s()
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "8", "-r", "8", "-t", "16s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = sorted(raw_records(report_dir), key=lambda r: r["t_sched_ns"])
    assert len(rows) == len(planned) and report["conservation"]["dropped"] == 0
    t0 = rows[0]["t_sched_ns"] / 1e9 - planned[0] / 100.0  # the schedule's clock start
    sent_trace_s = np.array([(r["t_send_ns"] / 1e9 - t0) * 100.0 for r in rows])  # back in trace seconds
    win = read_windows(str(trace))
    for w0 in (0.0, 600.0):
        asked = float(win.rate[np.flatnonzero(win.start == 81600 + w0)[0]])
        realised = np.count_nonzero((sent_trace_s >= w0) & (sent_trace_s < w0 + 600)) / 600
        print(
            f"servegen window +{w0:.0f} s: asked {asked:.4f} req/s, realised {realised:.4f} req/s"
        )  # -rP shows it
        assert realised == pytest.approx(asked, rel=0.05), (w0, asked, realised)
    row = report["delivered"]["by_target"][rows[0]["engine"]]["stages"]["trace"]
    assert row["asked"]["model"] == "trace" and row["rate_error"] == pytest.approx(0.0, abs=0.05)


def _mooncake_window(tmp_path, warm: bool):
    scenario = tmp_path / f"window-{warm}.toml"
    scenario.write_text(
        'schema = "loadkit.scenario/1"\nname = "mw"\nseed = 2\n[arrival]\nmodel = "trace"\n'
        '[prompt]\napi = "completions"\n[trace]\nformat = "mooncake"\n'
        'path = "${LOADKIT_PACKAGE_DATA}/traces/mooncake-fast25/conversation_trace.jsonl"\n'
        "start_s = 1800\nend_s = 1830\nspeed = 3.0\nmax_input_tokens = 2048\nmax_output_tokens = 4\n"
        + ("warm_cache = true\nwarm_cache_s = 4\n" if warm else "")
    )
    return scenario


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_windowed_mooncake_meets_the_cache_state_its_history_implies(tmp_path, warm):
    """A window from the middle of the trace: with warm-up the simulator's cached share of the
    window's prompt tokens is within 2 points of the share computed from the whole history;
    cold, it is the window-only share (far lower). Warm-up requests stay out of the stats."""
    from loadkit.workload import load_scenario
    from loadkit.workload.sourceparts import load_trace_for
    from loadkit.workload.warmcache import expected_shares, history_blocks

    scenario = _mooncake_window(tmp_path, warm)
    sc = load_scenario(scenario)
    full = load_trace_for(sc)
    window = full.window(1800, 1830)
    shares = expected_shares(window, history_blocks(full, 1800), 512, 2048)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--num-blocks", "400000", "--max-model-len", "8192") as sim:
        proc = run_locust(
            "--headless", "-u", "8", "-r", "8", "-t", "22s", "--stop-timeout", "10",
            "--host", sim.url, "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert len(rows) == len(window) and all(r["outcome"] == "ok" for r in rows)
    assert not any(r["label"] == "cache-warmup" or r["stage"] == "warmup" for r in rows)
    measured = sum(r["cached_tokens"] or 0 for r in rows) / sum(r["n_in"] for r in rows)
    target = shares["cached_share_with_history"] if warm else shares["cached_share_cold"]
    print(
        f"mooncake window warm={warm}: simulator cached share {measured:.4f}, from the whole history "
        f"{shares['cached_share_with_history']:.4f}, within the window {shares['cached_share_cold']:.4f}"
    )
    assert shares["cached_share_with_history"] > shares["cached_share_cold"] + 0.2
    assert measured == pytest.approx(target, abs=0.02), (measured, shares)
    sources = report["lengths"]["workload_sources"][0]
    source = next(iter(sources.values()))
    if warm:
        assert source["cache_warmup"]["requests"] > 0 and source["cache_warmup"]["prompt_tokens"] > 0
    else:
        assert "cache_warmup" not in source


TENANTS = """schema = "loadkit.scenario/1"
name = "tenants"
seed = 3
[arrival]
model = "closed"
users = 24
[slos]
ttft_ms = 150
[prompt]
api = "completions"
[[parts]]
name = "short"
input = { dist = "fixed", value = 64 }
output = { dist = "fixed", value = 24 }
[[parts]]
name = "long"
input = { dist = "fixed", value = 1024 }
output = { dist = "fixed", value = 24 }
[[tenants]]
name = "gold"
priority = 0
[[tenants]]
name = "bronze"
priority = 10
"""


@pytest.mark.parametrize("policy", ["priority", "fcfs"])
def test_tenant_priorities_reach_the_simulator_and_the_fairness_report(tmp_path, policy):
    """24 users against 4 running sequences: under priority scheduling the gold tenant's
    requests jump the queue (TTFT far lower, SLO met far more often, fairness index < 1); under
    FCFS both tenants wait alike."""
    scenario = tmp_path / "tenants.toml"
    scenario.write_text(TENANTS)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--max-num-seqs", "4", "--scheduling-policy", policy) as sim:
        proc = run_locust(
            "--headless", "-u", "24", "-r", "24", "-t", "8s", "--stop-timeout", "5",
            "--host", sim.url, "--scenario", str(scenario), "--report-dir", str(report_dir),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    ((engine, section),) = report["tenants"]["by_target"].items()
    gold, bronze = section["tenants"]["gold"], section["tenants"]["bronze"]
    assert gold["priority"] == 0 and bronze["priority"] == 10
    assert gold["requests"] + bronze["requests"] == report["engines"][engine]["requests"]
    assert set(report["engines"][engine]["labels"]) == {
        "gold/short",
        "gold/long",
        "bronze/short",
        "bronze/long",
    }
    assert gold["long_vs_short"]["long"] == "long" and gold["long_vs_short"]["ttft_p50_ratio"] is not None
    ratio = bronze["ttft_ms_p50"] / gold["ttft_ms_p50"]
    print(
        f"{policy}: TTFT p50 gold {gold['ttft_ms_p50']:.0f} ms, bronze {bronze['ttft_ms_p50']:.0f} ms; SLO met "
        f"{gold['slo_attainment']:.3f} vs {bronze['slo_attainment']:.3f}; Jain {section['jain_fairness']:.3f}"
    )
    if policy == "priority":
        assert ratio > 3, (gold["ttft_ms_p50"], bronze["ttft_ms_p50"])
        assert gold["slo_attainment"] > bronze["slo_attainment"] + 0.3
        assert section["jain_fairness"] < 0.9
    else:
        assert 0.6 < ratio < 1.6, (gold["ttft_ms_p50"], bronze["ttft_ms_p50"])
        assert section["jain_fairness"] > 0.9
    assert f"tenants {engine}: Jain fairness" in proc.stdout + proc.stderr
