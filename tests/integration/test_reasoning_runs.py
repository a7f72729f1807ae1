"""Real `locust --headless` runs against a reasoning simulator, one per engine and way of marking
reasoning: the first reasoning / answer / tool-call times and the token counts per channel in the
raw log and report.json match the simulator's truth log. Each run ends with the conservation check."""

from __future__ import annotations

import json

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust, truth_for

pytestmark = pytest.mark.integration

TOOLS = json.dumps(
    {"tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]}
)

# (sim family, loadkit engine, api, sim --reasoning-format, loadkit extra options, tool calls)
CASES = [
    ("openai", "vllm", "chat", "parser", (), False),
    ("openai", "vllm", "chat", "tags", ("--think-tags",), False),
    ("llamacpp", "llamacpp", "chat", "parser", (), False),
    ("ollama", "ollama", "chat", "parser", (), False),
    ("openai", "vllm", "chat", "parser", ("--extra-body", TOOLS), True),
]
MS = 1_000_000


def run(tmp_path, family, engine, api, fmt, extra):
    report_dir = tmp_path / "r"
    # The truth log is read once the simulator has exited and flushed it (no half-written line).
    with sim_process("--engine", family, "--profile", "fast", "--seed", "7", "--reasoning-mean-tokens", "6",
                     "--reasoning-dist", "uniform", "--reasoning-format", fmt,
                     truth_log=str(tmp_path / "truth.jsonl")) as sim:  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "4s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", engine, "--api", api, "--model", "sim-fast",
            "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", "--raw-log-events", *extra,
        )  # fmt: skip
    truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return check_conservation(report_dir), raw_records(report_dir), truth


def lateness_ms(seen: int | None, written: int | None) -> float:
    assert seen is not None and written is not None, (seen, written)
    return (seen - written) / MS


def stamp_of_write(row: dict, truth: dict, written: int) -> int:
    """The client's own stamp of the event that carried the server's write at ``written``: the
    channel's first time must be exactly that event's, whatever the machine's scheduling made
    of the lateness. A write holding the reasoning's end and the answer's start is two events
    to the client with one stamp (one read), so the events after it sit one place further."""
    seen, writes = row["event_t_ns"], truth["t_token_ns"]
    assert len(seen) in (len(writes), len(writes) + 1), (len(seen), len(writes))
    return seen[writes.index(written)]


@pytest.mark.parametrize(("family", "engine", "api", "fmt", "extra", "tools"), CASES,
                         ids=[f"{c[1]}-{c[3]}{'-tools' if c[5] else ''}" for c in CASES])  # fmt: skip
def test_channels_match_the_truth_log(tmp_path, family, engine, api, fmt, extra, tools):
    report, rows, truth = run(tmp_path, family, engine, api, fmt, extra)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) >= 10 and len(ok) >= 0.9 * len(rows)
    late: list[float] = []
    thinking = 0
    for r in ok:
        t = truth[r["request_id"]]
        reasoning, out = t["reasoning_tokens"], t["completion_tokens"]
        assert r["n_out"] == out
        assert r["n_reasoning"] == reasoning, (r, t)
        late.append(lateness_ms(r["t_first_ns"], t["t_token_ns"][0]))
        assert r["t_first_ns"] == r["event_t_ns"][0]
        if reasoning:
            thinking += 1
            late.append(lateness_ms(r["t_first_reasoning_ns"], t["t_first_reasoning_ns"]))
            assert r["t_first_reasoning_ns"] == stamp_of_write(r, t, t["t_first_reasoning_ns"])
            assert r["ttfrt_ms"] == pytest.approx(r["ttft_ms"]) and r["reasoning_ms"] >= 0
        else:
            assert r["t_first_reasoning_ns"] is None and r["ttfrt_ms"] is None and r["reasoning_ms"] is None
        if tools:
            assert r["n_tool"] == out - reasoning and r["n_answer"] == 0 and r["ttfat_ms"] is None
            assert r["tool_calls"][0]["name"] == "lookup" and r["tool_calls"][0]["id"]
            late.append(lateness_ms(r["t_first_tool_ns"], t["t_first_tool_ns"]))
            assert r["t_first_tool_ns"] == stamp_of_write(r, t, t["t_first_tool_ns"])
        else:
            assert r["n_answer"] == out - reasoning and r["n_tool"] is None
            late.append(lateness_ms(r["t_first_answer_ns"], t["t_first_answer_ns"]))
            assert r["t_first_answer_ns"] == stamp_of_write(r, t, t["t_first_answer_ns"])
            assert r["ttfat_ms"] >= r["ttft_ms"]
    assert thinking >= 0.5 * len(ok), "the simulator drew reasoning for most replies"
    # Each channel's time is exactly the stamp of the event that carried its write (above): that
    # is what this test is for. The lateness of those stamps is the client's timing, measured in
    # test_local_runs and benchmarks/bench_client.py: here only seen at or after the write and
    # within 1 ms of it at the median. Its tail is the shared 2-core machine's scheduling of the
    # simulator between its stamp and its write (CI once saw 7 of ~120 at 5.0-10.2 ms, multiples
    # of a 5 ms time slice, while every stamp above was the right event's).
    assert min(late) >= 0, "client saw a token before the server wrote it"
    late.sort()
    median, p95 = late[len(late) // 2], late[int(0.95 * (len(late) - 1))]
    print(f"{engine}-{fmt}: {len(late)} first-token times, lateness median {median:.3f} ms, p95 {p95:.3f} ms")
    assert median < 1.0, (median, p95, late[-10:])
    section = next(iter(report["engines"].values()))
    channel = "ttftc_ms" if tools else "ttfat_ms"
    assert section[channel]["count"] == len(ok)
    assert section["ttfrt_ms"]["count"] == thinking
    assert section["n_reasoning"]["count"] == len(ok)
