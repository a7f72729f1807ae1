"""Synthetic report documents and raw logs shaped like loadkit.report/1 (see loadkit/stats/report.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

Q = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def summary(values: np.ndarray) -> dict[str, Any]:
    if values.size == 0:
        return {"count": 0, "mean": None, "min": None, "max": None, **{k: None for k in Q}}
    out = {"count": int(values.size), "mean": float(values.mean()), "min": float(values.min()),
           "max": float(values.max())}  # fmt: skip
    out.update({k: float(np.quantile(values, q)) for k, q in Q.items()})
    return out


def make_rows(engine: str, n: int, seed: int, ttft_scale: float = 20.0, tpot: float = 5.0,
              stages: tuple[str, ...] = ("low", "high"), turns: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """Raw-log rows: lognormal TTFT around ttft_scale ms, TPOT around tpot ms, a few failures."""
    rng = np.random.default_rng(seed)
    rows, t = [], 1_000_000_000_000
    for i in range(n):
        ttft = float(ttft_scale * rng.lognormal(0, 0.5))
        n_out = int(rng.integers(2, 200))
        tp = float(tpot * rng.lognormal(0, 0.1))
        send = t + i * 50_000_000
        first = send + int(ttft * 1e6)
        end = first + int(tp * (n_out - 1) * 1e6)
        outcome = "ok" if i % 25 else "http_error:503"
        ok = outcome == "ok"
        rows.append({"request_id": f"{engine}-{i}", "engine": engine, "label": "chat" if i % 3 else "quick",
                     "outcome": outcome, "ttft_ms": ttft if ok else None, "ttft_sched_ms": ttft + 1.0 if ok else None,
                     "tpot_ms": tp if ok else None, "e2e_ms": (end - send) / 1e6 if ok else None,
                     "n_in": int(rng.choice([100, 700, 2000, 9000, 20000])), "n_out": n_out if ok else None,
                     "t_sched_ns": send, "t_send_ns": send, "t_first_ns": first if ok else None,
                     "t_end_ns": end, "turn": (i % 4) + 1 if turns else None,
                     "stage": stages[min(len(stages) - 1, i * len(stages) // n)] if stages else None})  # fmt: skip
    return rows


def record_of(row: dict[str, Any]) -> Any:
    """A raw-log row as the RequestRecord it was written from (first and last event, end)."""
    from loadkit.records import RequestRecord

    ok = row["outcome"] == "ok"
    events = [row["t_first_ns"], row["t_end_ns"]] if ok and row["t_first_ns"] is not None else []
    return RequestRecord(request_id=row["request_id"], engine=row["engine"], adapter="openai", label=row["label"],
                         outcome=row["outcome"], t_sched_ns=row["t_sched_ns"], t_send_ns=row["t_send_ns"],
                         t_end_ns=row["t_end_ns"], event_t_ns=events, n_in=row["n_in"], n_out=row["n_out"],
                         turn=row["turn"], stage=row["stage"])  # fmt: skip


def grouped_sections(rows_by_engine: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """report.json's stages, sessions and lengths sections for these rows, through the stats
    code a live run uses (what report.html's stage, bucket and turn tables read)."""
    from loadkit.stats.lengthstats import LengthStats
    from loadkit.stats.sessionstats import SessionStats
    from loadkit.stats.stagestats import StageStats

    stages, sessions, lengths = StageStats(), SessionStats(), LengthStats()
    names = []
    for rows in rows_by_engine.values():
        for row in rows:
            r = record_of(row)
            stages.add(r)
            sessions.add_turn(r)
            lengths.add(r)
            if r.stage is not None and r.stage not in names:
                names.append(r.stage)
    plan = [{"name": n, "level": i + 1, "level_kind": "rate", "duration_s": 5.0} for i, n in enumerate(names)]
    return {
        "stages": stages.report(plan),
        "sessions": sessions.report(),
        "lengths": {"asked": None, "by_target": lengths.report(), "workload_sources": []},
    }


def report_from_rows(rows_by_engine: dict[str, list[dict[str, Any]]], **extra: Any) -> dict[str, Any]:
    engines = {}
    for engine, rows in rows_by_engine.items():
        engines[engine] = engine_section(rows)
    report = {"schema": "loadkit.report/1", "generated_unix": 1_700_000_000.0, "valid": True, "errors": [],
              "warnings": ["client was the bottleneck for target a: open-loop schedule fell behind"],
              "manifest": {"started_unix": 1_700_000_000.0, "stopped_unix": 1_700_000_010.0, "slos": {"ttft_ms": 30.0},
                           "loadkit_version": "0.1.0", "locust_version": "2.47.0",
                           "scenario": {"path": "scenarios/x.toml", "sha256": "ab" * 32, "seed": 3,
                                        "arrival": {"model": "poisson", "stages": [{"duration_s": 5, "rate": 1}]}},
                           "client": {"hostname": "h", "cpu_model": "Test CPU", "cores": 2, "python": "3.11.7"},
                           "targets": [{"name": e, "engine": "vllm", "api": "chat", "url": "http://127.0.0.1:1",
                                        "server": {"model": "m", "engine_version": "0.11"}} for e in rows_by_engine]},
              "conservation": {"scheduled": None, "sent": 0, "dropped": 0, "outcomes_total": 0, "holds": True},
              "workers": {"count": 0, "lost": 0, "nodes": []}, "engines": engines, "task_errors": {},
              **grouped_sections(rows_by_engine)}  # fmt: skip
    report.update(extra)
    return report


def engine_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["outcome"] == "ok"]
    col = {
        k: np.array([r[k] for r in ok], dtype=float)
        for k in ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "n_in", "n_out")
    }
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    window = 10.0
    good = int((col["ttft_ms"] <= 30.0).sum())
    slo = {"good": good, "judged": len(ok), "goodput_per_s": good / window, "good_fraction": good / len(ok),
           "attainment": {"ttft_ms": {"limit_ms": 30.0, "met": good, "violated": len(ok) - good, "not_measured": 0,
                                      "attainment": good / len(ok)}}}  # fmt: skip
    failed = {o: n for o, n in outcomes.items() if o != "ok"}
    messages = {o: {"total": n, "top": [{"message": '{"error": "overloaded, retry later"}', "count": n}], "other": 0}
                for o, n in failed.items()}  # fmt: skip
    section = {"requests": len(rows), "ok": len(ok), "failures": len(rows) - len(ok), "cancelled": 0,
               "outcomes": outcomes, "error_messages": messages, "stream_ends": {"marker": len(ok)},
               "output_tokens": int(col["n_out"].sum()), "window_s": window, "requests_per_s": len(rows) / window,
               "ok_per_s": len(ok) / window, "output_tokens_per_s": float(col["n_out"].sum()) / window,
               "goodput_per_s": slo["goodput_per_s"], "slo": slo, "n_out_sources": {"usage": len(ok), "events": 2},
               "itl_ms": summary(col["tpot_ms"]), "itl_chunk_ms": summary(col["tpot_ms"]),
               "timeseries": {"t": list(range(11)), "unix": list(range(11)), "requests": [3] * 11, "ok": [3] * 11,
                              "output_tokens": [100 + 10 * i for i in range(11)], "in_flight": [2.5] * 11}}  # fmt: skip
    for name in col:
        section[name] = summary(col[name])
    section["labels"] = {"chat": dict(section, labels={}), "quick": dict(section, labels={})}
    return section


def write_run(
    folder: Path, rows_by_engine: dict[str, list[dict[str, Any]]], raw: bool = True, **extra: Any
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_bytes(orjson.dumps(report_from_rows(rows_by_engine, **extra)))
    if raw:
        with open(folder / "requests.jsonl", "wb") as f:
            for rows in rows_by_engine.values():
                for r in rows:
                    f.write(orjson.dumps(r) + b"\n")
    return folder


SERVER_METRICS = {"a": {"interval_s": 1.0, "errors": 1, "samples": [
    {"t": 100.0, "values": {"running": 1, "waiting": 0, "kv_usage": 0.1}, "error": None},
    {"t": 101.0, "values": {"running": 4, "waiting": 2, "kv_usage": 0.5}, "error": None},
    {"t": 102.0, "values": {}, "error": "GET /metrics: HTTP 500"}]}}  # fmt: skip


@pytest.fixture
def full_run(tmp_path: Path) -> Path:
    """Two engines with raw log, stages, turns, SLOs and server metrics in the manifest."""
    rows = {"a": make_rows("a", 400, 1), "b": make_rows("b", 400, 2, ttft_scale=60.0, tpot=30.0)}
    folder = write_run(tmp_path / "run", rows)
    report = orjson.loads((folder / "report.json").read_bytes())
    report["manifest"]["server_metrics"] = SERVER_METRICS
    report["delivered"] = delivered_from_rows(rows, report["manifest"]["scenario"]["arrival"])
    (folder / "report.json").write_bytes(orjson.dumps(report))
    return folder


def delivered_from_rows(
    rows_by_engine: dict[str, list[dict[str, Any]]], arrival: dict[str, Any]
) -> dict[str, Any]:
    """The run's delivered section, through the code a live run uses (loadkit.stats.delivered)."""
    from types import SimpleNamespace

    from loadkit.stats.delivered import DeliveredLoad, one_context

    load = DeliveredLoad()
    for rows in rows_by_engine.values():
        for r in rows:
            load.add(SimpleNamespace(**r))
    return load.report(one_context(arrival))
