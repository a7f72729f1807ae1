"""The oracle's kinds check (loadkit/verify/kinds.py) on a report and raw log written by the
stats from the same records: it agrees with the rows, and names a tampered figure."""

from __future__ import annotations

import random

import orjson

from loadkit.records import RequestRecord
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.collector import StatsCollector
from loadkit.stats.rawlog import RawLog
from loadkit.verify.compare import Verdict
from loadkit.verify.kinds import kinds
from loadkit.verify.rawlog import load_run

MS = 1_000_000


def records(n: int = 300) -> list[RequestRecord]:
    rng, out = random.Random(11), []
    for i in range(n):
        kind = rng.choice(("chat", "embeddings", "rerank"))
        send = (1_000 + 3 * i) * MS
        end = send + rng.randint(2 * MS, 400 * MS)
        outcome = "ok" if rng.random() > 0.1 else rng.choice(("http_error:500", "timeout"))
        r = RequestRecord(request_id=f"r{i}", engine=rng.choice(("a", "b")), adapter="openai", label=kind,
                          outcome=outcome, t_start_ns=send, t_send_ns=send, t_end_ns=end, kind=kind)  # fmt: skip
        if kind == "chat":
            r.event_t_ns, r.event_tokens, r.n_out = [send + MS, end], [1, 1], 2
            r.n_in = 30
        else:
            r.n_items = rng.choice((1, 2, 8, 32, 100))
            r.n_in = 7 * r.n_items if outcome == "ok" else None
        out.append(r)
    return out


def written_run(tmp_path):
    c = StatsCollector(slos={"latency_ms": 200.0, "e2e_ms": 300.0})
    BuiltinSections(c).install()
    c.reset()
    c.raw_log = RawLog(str(tmp_path / "requests.jsonl"))
    for r in records():
        c.add(r)
    c.raw_log.close()
    (tmp_path / "report.json").write_bytes(orjson.dumps(c.report()))
    return load_run(tmp_path)


def test_the_oracle_recomputes_every_kind_row(tmp_path):
    run = written_run(tmp_path)
    assert {r["kind"] for r in run.report["kinds"]["rows"]} == {"chat", "embeddings", "rerank"}
    v = Verdict()
    kinds(run, v)
    assert v.ok, [str(d) for d in v.disagreements]
    assert v.checked["kinds"] > 6 * 20  # six rows, every figure of each


def test_a_tampered_row_is_named(tmp_path):
    run = written_run(tmp_path)
    row = next(r for r in run.report["kinds"]["rows"] if r["kind"] == "rerank" and r["target"] == "a")
    row["items"] += 1
    row["latency_per_item_ms"]["p90"] *= 1.01
    row["batch_size"]["distribution"]["8"] -= 1
    v = Verdict()
    kinds(run, v)
    wrong = {(d.key, d.figure) for d in v.disagreements}
    assert wrong == {("a / rerank", "items"), ("a / rerank", "latency_per_item_ms.p90"),
                     ("a / rerank", "batch_size.distribution")}  # fmt: skip


def test_a_line_counted_under_no_kind_breaks_the_conservation(tmp_path):
    run = written_run(tmp_path)
    run.report["kinds"]["rows"] = [
        r for r in run.report["kinds"]["rows"] if r["kind"] != "chat" or r["target"] != "b"
    ]
    v = Verdict()
    kinds(run, v)
    figures = {d.figure for d in v.disagreements}
    assert {"rows", "Σ requests", "Σ requests of its kinds = the engine's"} <= figures
