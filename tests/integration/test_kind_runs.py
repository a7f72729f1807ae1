"""Embeddings, rerank, mixed kinds and the RAG user, run for real (`loadkit run` against the
simulator it starts, over loopback HTTP) with the conservation check and `loadkit verify`'s
oracle (check_conservation runs it, kinds section included): every request is in exactly one
kind's row, body kinds stay out of the streamed figures, and a distributed run's rows merge
exactly. A target whose engine does not serve a kind is refused at start."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.runs import check_conservation, raw_records
from tests.helpers.simruns import loadkit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEAD = 'schema = "loadkit.scenario/1"\nname = "{name}"\nseed = 7\n'
MIX = """
[slos]
ttft_ms = 5000
latency_ms = 5000
[[parts]]
name = "emb"
kind = "embeddings"
inputs = { dist = "uniform", low = 1, high = 16 }
input_tokens = { dist = "uniform", low = 8, high = 64 }
[[parts]]
name = "rr"
kind = "rerank"
query_tokens = 12
documents = { dist = "uniform", low = 2, high = 20 }
document_tokens = 40
top_n = 3
[[parts]]
name = "chat"
input = 32
output = 8
"""
RAG = """
[arrival]
{arrival}
[rag]
query_tokens = 10
documents = {{ dist = "uniform", low = 4, high = 12 }}
document_tokens = 30
top_k = 2
output_tokens = 6
"""


def run(
    tmp_path: Path, scenario: str, *extra: str, users: int = 4, seconds: int = 4
) -> tuple[dict[str, Any], list]:
    report_dir = tmp_path / "r"
    proc = loadkit("run", "--scenario", scenario, "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
                   "--stop-timeout", "15", "--report-dir", str(report_dir), "--raw-log", *extra, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = check_conservation(report_dir)  # and the oracle, kinds rows included
    assert report["valid"], report["invalid_reasons"]
    report["_output"] = proc.stdout + proc.stderr  # the console's and Locust's own tables
    return report, raw_records(report_dir)


def write(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(HEAD.format(name=name) + body)
    return str(path)


def kind_rows(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["target"], r["kind"]): r for r in report["kinds"]["rows"]}


def check_body_kind_lines(
    rows: list[dict[str, Any]], kind: str, top_n: int | None = None
) -> list[dict[str, Any]]:
    """Every line of ``kind``: answered whole (items back = items sent, or the top_n asked), no
    token event, its latency the E2E, per item = latency / items sent; returns the ok ones."""
    mine = [r for r in rows if r["kind"] == kind]
    assert mine, {r["kind"] for r in rows}
    failed = [r for r in mine if r["outcome"] not in ("ok", "cancelled")]
    assert not failed, failed[:2]
    ok = [r for r in mine if r["outcome"] == "ok"]
    for r in ok:
        assert r["n_items"] >= 1 and r["n_in"] and r["n_in"] > 0
        assert r["n_items_returned"] == (r["n_items"] if top_n is None else min(top_n, r["n_items"]))
        assert r["t_first_ns"] is None and r["ttft_ms"] is None and r["tpot_ms"] is None
        assert r["latency_ms"] == r["e2e_ms"] == (r["t_end_ns"] - r["t_send_ns"]) / 1e6
        if r["n_items"] >= 2:
            per = (2 * (r["t_end_ns"] - r["t_send_ns"]) + r["n_items"]) // (2 * r["n_items"])
            assert r["latency_per_item_ms"] == per / 1e6
    return ok


def check_row(report: dict[str, Any], rows: list[dict[str, Any]], target: str, kind: str) -> dict[str, Any]:
    row = kind_rows(report)[(target, kind)]
    mine = [r for r in rows if r["engine"] == target and r["kind"] == kind]
    ok = [r for r in mine if r["outcome"] == "ok"]
    assert row["requests"] == len(mine) and row["ok"] == len(ok) > 0
    assert row["latency_ms"]["count"] == len(ok)
    assert row["items"] == sum(r["n_items"] or 0 for r in ok)
    assert row["input_tokens"] == sum(r["n_in"] for r in ok)
    return row


@pytest.mark.parametrize("scenario", ["embeddings-closed", "embeddings-open"])
def test_embeddings_closed_and_open_loop(tmp_path, scenario):
    report, rows = run(tmp_path, scenario)
    ok = check_body_kind_lines(rows, "embeddings")
    row = check_row(report, rows, "sim", "embeddings")
    assert set(kind_rows(report)) == {("sim", "embeddings")}
    assert row["batch_size"]["max"] > 1 and row["items_per_s"] > row["ok_per_s"]
    engine = report["engines"]["sim"]
    # Body kinds are counted by the engine row but give it no streamed figure.
    assert engine["requests"] == row["requests"] and engine["ttft_ms"]["count"] == 0
    assert engine["e2e_ms"]["count"] == 0
    if scenario == "embeddings-open":
        assert all(r["t_sched_ns"] is not None for r in ok)  # sent on the Poisson schedule
        assert 8 < row["requests_per_s"] < 40  # asked 20/s, over a few seconds
    # The scenario's latency SLOs judge them (latency_per_item_ms: not for one-input requests).
    att = engine["slo"]["attainment"]
    assert att["latency_ms"]["met"] + att["latency_ms"]["violated"] == len(ok)
    singles = sum(1 for r in ok if r["n_items"] == 1)
    assert att.get("latency_per_item_ms", {"not_measured": singles})["not_measured"] == singles


def test_rerank(tmp_path):
    report, rows = run(tmp_path, "rerank")
    ok = check_body_kind_lines(rows, "rerank", top_n=5)
    row = check_row(report, rows, "sim", "rerank")
    assert all(10 <= r["n_items"] <= 100 for r in ok)
    assert row["latency_per_item_ms"]["count"] == len(ok)
    assert row["latency_per_item_ms"]["p50"] < row["latency_ms"]["p50"] / 5


def test_mixed_kinds_each_in_their_rows(tmp_path):
    report, rows = run(tmp_path, write(tmp_path, "mix", MIX), users=6)
    for kind, top_n in (("embeddings", None), ("rerank", 3)):
        check_body_kind_lines(rows, kind, top_n)
        check_row(report, rows, "sim", kind)
    chat = check_row(report, rows, "sim", "chat")
    chat_ok = [r for r in rows if r["kind"] == "chat" and r["outcome"] == "ok"]
    engine = report["engines"]["sim"]
    # The engine's E2E and TTFT are the chats' alone; its request count is every kind's.
    assert engine["e2e_ms"]["count"] == engine["ttft_ms"]["count"] == len(chat_ok) == chat["ok"]
    assert engine["requests"] == sum(r["requests"] for r in report["kinds"]["rows"]) == len(rows)
    assert chat["latency_ms"]["p99"] == pytest.approx(engine["e2e_ms"]["p99"], rel=1e-9)
    rates = sum(r["requests_per_s"] for r in report["kinds"]["rows"])
    assert rates == pytest.approx(engine["requests_per_s"], rel=1e-9)
    # ttft_ms judges the chats, latency_ms the others; neither fails for lack of the other's figure.
    att = engine["slo"]["attainment"]
    assert att["ttft_ms"]["met"] == len(chat_ok) and att["latency_ms"]["met"] == engine["ok"] - len(chat_ok)
    assert engine["slo"]["good"] == engine["ok"]
    # Locust's own table gives each non-chat kind a row of its own; the console a line per kind.
    out = report["_output"]
    assert "sim emb [embeddings]" in out and "sim rr [rerank]" in out and "sim chat " in out
    assert "kind embeddings @ sim: " in out and "kind rerank @ sim: " in out
    html = (tmp_path / "r" / "report.html").read_text()
    assert '<section id="kinds"' in html or 'id="kinds"' in html
    assert html.count("<td>embeddings</td>") == html.count("<td>rerank</td>") == 1


@pytest.mark.parametrize("arrival", ['model = "closed"\nusers = 3', 'model = "poisson"\nrate = 6.0'])
def test_rag_user(tmp_path, arrival):
    report, rows = run(tmp_path, write(tmp_path, "rag", RAG.format(arrival=arrival)), users=3)
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_session[r["session_id"]].append(r)
    done = 0
    for sid, turns in by_session.items():
        assert sid is not None
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == list(range(1, len(turns) + 1))
        assert [r["kind"] for r in turns] == ["embeddings", "rerank", "chat"][: len(turns)]
        for a, b in zip(turns, turns[1:], strict=False):
            assert a["outcome"] == "ok" and b["t_send_ns"] >= a["t_end_ns"]  # the next turn after the answer
        if len(turns) == 3 and turns[2]["outcome"] == "ok":
            done += 1
            assert turns[1]["n_items"] >= 4 and turns[0]["n_items"] == 1
            if "poisson" in arrival:
                assert turns[0]["t_sched_ns"] is not None and turns[2]["t_sched_ns"] is None
    assert done >= 3
    assert {k for _, k in kind_rows(report)} == {"embeddings", "rerank", "chat"}
    for kind in ("embeddings", "rerank", "chat"):
        check_row(report, rows, "sim", kind)
    assert report["sessions"]["sim"]["completed"] >= done


def test_distributed_rows_merge_exactly(tmp_path):
    report, rows = run(tmp_path, write(tmp_path, "mix", MIX), "--processes", "2", users=6)
    assert {r["worker"] for r in rows} == {0, 1}
    for kind in ("embeddings", "rerank", "chat"):
        row = check_row(report, rows, "sim", kind)
        per_worker = [sum(1 for r in rows if r["kind"] == kind and r["worker"] == w) for w in (0, 1)]
        assert all(per_worker) and row["requests"] == sum(per_worker)
        mine = [r for r in rows if r["kind"] == kind and r.get("n_items") is not None]
        sizes: dict[str, int] = {}
        for r in mine:
            sizes[str(r["n_items"])] = sizes.get(str(r["n_items"]), 0) + 1
        assert (row["batch_size"] or {}).get("distribution", {}) == sizes


def test_a_target_not_serving_the_kind_is_refused_at_start(tmp_path):
    report_dir = tmp_path / "r"
    proc = loadkit("run", "--scenario", "embeddings-closed", "--target", "trt=http://127.0.0.1:9",
                   "--engine", "tensorrt-llm", "-u", "1", "-r", "1", "-t", "2s", "--report-dir", str(report_dir))  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-2000:]
    assert ("target 'trt': engine 'tensorrt-llm' does not serve embeddings requests (scenario "
            "'embeddings-closed' sends them; tensorrt-llm serves: chat; engines that serve embeddings: openai, "
            "vllm, sglang, tgi, llamacpp, ollama)") in out  # fmt: skip
    assert not list(report_dir.glob("requests*.jsonl")) or not raw_records(report_dir)


@pytest.mark.parametrize(("sim_engine", "engine"), [("openai", "vllm"), ("tgi", "tgi")])
def test_mixed_body_kinds_against_the_truth_log(tmp_path, sim_engine, engine):
    """Each ok body-kind request is the one the simulator served: same kind, same items, and
    the input tokens the report's rows sum are the server's own count (usage = truth)."""
    from loadkit.sim.testing import sim_process
    from tests.helpers.runs import run_locust, truth_for

    scenario = write(
        tmp_path, "bodies", MIX.replace('[[parts]]\nname = "chat"\ninput = 32\noutput = 8\n', "")
    )
    report_dir = tmp_path / "r"
    with sim_process("--engine", sim_engine, "--profile", "fast", "--seed", "7",
                     truth_log=str(tmp_path / "truth.jsonl")) as sim:  # fmt: skip
        proc = run_locust("--headless", "-u", "3", "-r", "3", "-t", "3s", "--stop-timeout", "5", "--host", sim.url,
                          "--engine", engine, "--model", "sim-fast", "--scenario", scenario,
                          "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        truth = truth_for(sim, report_dir)
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert {r["kind"] for r in ok} == {"embeddings", "rerank"}
    for r in ok:
        t = truth[r["request_id"]]
        assert (t["kind"], t["items"]) == (r["kind"], r["n_items"])
        assert t["prompt_tokens"] == r["n_in"]
    for kind in ("embeddings", "rerank"):
        row = kind_rows(report)[(engine, kind)]
        assert row["input_tokens"] == sum(
            truth[r["request_id"]]["prompt_tokens"] for r in ok if r["kind"] == kind
        )
