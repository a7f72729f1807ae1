"""A real headless load against ``loadkit sim``, and the check of what it measured against the
simulator's truth log (what the server itself wrote, and when).

    run = run_against_sim(tmp_path, "anthropic", sim_args=["--fault", "error_event=0.1"])
    lateness_ms = run.check_against_truth()     # asserts; returns TTFT lateness per ok request

The simulator runs as its own process, the load as ``loadkit run`` (Locust, headless, this
loadkit's locustfile), both on loopback and bounded in time and request count.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadkit.sim.testing import sim_process


@dataclass
class SimRun:
    """One finished run: the ``loadkit run`` process, its report, raw log rows and the truth."""

    proc: subprocess.CompletedProcess[str]
    report: dict[str, Any]
    rows: list[dict[str, Any]]
    truth: dict[str, dict[str, Any]]

    def outcome(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["outcome"] == name]

    def check_against_truth(self, median_lateness_ms: float = 5.0) -> list[float]:
        """Conservation holds; every ok request's tokens, prompt, cached tokens and event times
        agree with the server's record; the median first-token lateness is under the bound."""
        assert self.proc.returncode == 0, self.proc.stderr[-3000:]
        assert self.report["conservation"]["holds"], self.report["conservation"]
        assert len(self.rows) == self.report["conservation"]["sent"]
        lateness = [self._check_one(r, self.truth[r["request_id"]]) for r in self.outcome("ok")]
        assert lateness, f"no ok request: {sorted({r['outcome'] for r in self.rows})}"
        assert statistics.median(lateness) < median_lateness_ms, sorted(lateness)
        return lateness

    @staticmethod
    def _check_one(row: dict[str, Any], truth: dict[str, Any]) -> float:
        rid = row["request_id"]
        # Counted from events or a tokenizer, n_out is an estimate the truth cannot pin down
        # (a server may put several tokens in one event); from usage it must be exact.
        if row["n_out_source"] == "usage":
            assert row["n_out"] == truth["completion_tokens"], rid
        if row["n_in"] is not None:
            assert row["n_in"] == truth["prompt_tokens"], rid
        if row.get("cached_tokens") is not None:
            assert row["cached_tokens"] == truth["cached_tokens"], rid
        written = truth["t_token_ns"]
        assert len(row["event_t_ns"]) == len(written), f"{rid}: one recorded event per event written"
        assert all(seen >= sent for seen, sent in zip(row["event_t_ns"], written, strict=True)), \
            f"{rid}: a token seen before the server wrote it"
        return float((row["t_first_ns"] - written[0]) / 1e6)


def run_against_sim(report_dir: str | Path, engine: str, *, requests: int = 40, users: int = 4,
                    sim_args: Sequence[str] = (), run_args: Sequence[str] = (), profile: str = "fast",
                    seed: int = 5, timeout_s: float = 120.0) -> SimRun:
    """Serve ``engine`` (a simulator family) and load it with ``loadkit run --engine auto``."""
    report_dir = Path(report_dir)
    with sim_process("--engine", engine, "--profile", profile, "--seed", str(seed), *sim_args) as sim:
        cmd = [sys.executable, "-m", "loadkit.cli", "run", "--host", sim.url, "--engine", "auto",
               "-u", str(users), "-r", str(users), "-t", f"{int(timeout_s / 2)}s", "--max-requests", str(requests),
               "--report-dir", str(report_dir), "--raw-log", "--raw-log-events", "--scrape-interval", "0",
               "--exit-code-on-error", "0", *run_args]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        report_dir = _written_dir(proc.stderr, report_dir)
        rows = _raw_rows(report_dir)
        truth = {t["request_id"]: t for t in sim.wait_truth(len(rows), timeout_s=10)}
    report_path = report_dir / "report.json"
    report = orjson.loads(report_path.read_bytes()) if report_path.exists() else {"conservation": {}}
    return SimRun(proc, report, rows, truth)


def _written_dir(stderr: str, given: Path) -> Path:
    """Where the run wrote: ``given``, or ``given-2`` … when an earlier run holds it (each run
    has a directory of its own, loadkit/stats/rundir.py; the run's log line names it)."""
    found = re.findall(r"reports go to (.+)$", stderr, flags=re.MULTILINE)
    return Path(found[-1].strip()) if found else given


def _raw_rows(report_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for path in sorted(report_dir.glob("requests*.jsonl"))
            for line in path.read_bytes().splitlines() if line.strip()]
