"""Helpers for integration tests that run real Locust processes against the simulator."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "locustfiles" / "llm.py"
SCENARIOS = REPO / "tests" / "integration" / "scenarios"


def locust_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args]


def run_locust(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        locust_cmd(*args), capture_output=True, text=True, timeout=timeout, env=full_env, cwd=REPO
    )
    return proc


def load_report(report_dir: Path) -> dict[str, Any]:
    return json.loads((report_dir / "report.json").read_text())


def raw_records(report_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(report_dir.glob("requests*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def check_conservation(report_dir: Path) -> dict[str, Any]:
    """scheduled = sent + dropped; sent = Σ outcomes; raw log, report.json agree; ids unique."""
    report = load_report(report_dir)
    cons = report["conservation"]
    assert cons["scheduled"] == cons["sent"] + cons["dropped"], cons
    outcomes_total = sum(sum(e["outcomes"].values()) for e in report["engines"].values())
    assert cons["sent"] == outcomes_total == cons["outcomes_total"], (cons, outcomes_total)
    assert sum(e["requests"] for e in report["engines"].values()) == outcomes_total
    rows = raw_records(report_dir)
    if rows:
        assert len(rows) == outcomes_total, (len(rows), outcomes_total)
        ids = [r["request_id"] for r in rows]
        assert len(set(ids)) == len(ids), "a request was recorded twice"
        for engine, section in report["engines"].items():
            mine = [r for r in rows if r["engine"] == engine]
            counts: dict[str, int] = {}
            for r in mine:
                counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
            assert counts == {k: v for k, v in section["outcomes"].items() if v}, (engine, counts)
        check_oracle(report_dir, report)
    return report


def check_oracle(report_dir: Path, report: dict[str, Any]) -> None:
    """``loadkit verify``'s oracle agrees with every figure it recomputes (issue 31: the oracle
    runs on every integration run that keeps a raw log, so the matrix is the suite itself). A
    run that lost a worker is exempt: its report keeps the worker's last snapshot while the raw
    log runs on, and the oracle says so instead of agreeing."""
    if (report.get("workers") or {}).get("lost"):
        return
    from loadkit.verify import load_run, verify_run

    verdict = verify_run(load_run(report_dir))
    assert verdict.ok, f"loadkit verify {report_dir}: " + "; ".join(str(d) for d in verdict.disagreements[:8])


def check_percentiles_match_raw(
    report: dict[str, Any], rows: list[dict[str, Any]], rel: float = 0.002
) -> int:
    """Report percentiles equal the exact nearest-rank percentiles of the raw log, within the
    histogram's precision. Returns how many comparisons were made."""
    compared = 0
    for engine, section in report["engines"].items():
        ok_rows = [r for r in rows if r["engine"] == engine and r["outcome"] == "ok"]
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            values = [r[metric] for r in ok_rows if r[metric] is not None]
            if len(values) < 5:
                continue
            summary = section[metric]
            assert summary["count"] == len(values), (engine, metric)
            for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                exact = nearest_rank(values, q)
                assert summary[key] == pytest.approx(exact, rel=rel, abs=0.002), (engine, metric, key)
                compared += 1
    return compared


def truth_for(sim: Any, report_dir: Path, timeout_s: float = 10.0) -> dict[str, dict[str, Any]]:
    """The simulator's truth records by request id, once every request of the raw log that
    reached the server is in it (the simulator flushes its truth log every 0.5 s)."""
    wanted = {r["request_id"] for r in raw_records(report_dir) if r["outcome"] != "connect_error"}
    return sim.wait_truth_for(wanted, timeout_s)
