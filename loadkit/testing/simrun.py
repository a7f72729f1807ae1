"""A real headless load against ``loadkit sim``, and the check of what it measured against the
simulator's truth log (what the server itself wrote, and when).

    run = run_against_sim(tmp_path, "anthropic", sim_args=["--fault", "error_event=0.1"])
    lateness_ms = run.check_against_truth()     # asserts; returns TTFT lateness per ok request

The truth log is read for the measured requests by id (the pre-flight request has a line too),
and each ok request is checked event by event: its time, and its token count against the
server's write.

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

from loadkit.sim.testing import SimHandle, sim_process
from loadkit.stats.rawlog import raw_log_paths, read_rows


@dataclass
class SimRun:
    """One finished run: the ``loadkit run`` process, its report, raw log rows and the truth."""

    proc: subprocess.CompletedProcess[str]
    report: dict[str, Any]
    rows: list[dict[str, Any]]
    truth: dict[str, dict[str, Any]]

    def outcome(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["outcome"] == name]

    def check_against_truth(
        self, median_lateness_ms: float = 5.0, exact_event_tokens: bool = False
    ) -> list[float]:
        """Conservation holds; every ok request's tokens, prompt, cached tokens and events agree
        with the server's record (one recorded event per event written, none seen before it was
        written, each event's token count the server's); the median first-token lateness is
        under the bound. A kind answered in one body (embeddings, rerank) is checked on its
        kind, items, input tokens and the read of its answer (``_check_body``).

        Where the server wrote several tokens in one event, an adapter whose protocol does not
        state tokens per event (Anthropic's deltas, OpenAI chunks without running usage) can
        only count it as one: that is allowed unless ``exact_event_tokens`` (for adapters that
        read the count from the stream, e.g. vLLM's ``continuous_usage_stats``). Any other
        difference fails, whatever the total."""
        assert self.proc.returncode == 0, self.proc.stderr[-3000:]
        assert self.report["conservation"]["holds"], self.report["conservation"]
        assert len(self.rows) == self.report["conservation"]["sent"]
        ok = self.outcome("ok")
        missing = [r["request_id"] for r in ok if r["request_id"] not in self.truth]
        assert not missing, f"no truth line for {len(missing)} ok request(s): {missing[:5]}"
        lateness = [self._check_one(r, self.truth[r["request_id"]], exact_event_tokens) for r in ok]
        assert lateness, f"no ok request: {sorted({r['outcome'] for r in self.rows})}"
        assert statistics.median(lateness) < median_lateness_ms, sorted(lateness)
        return lateness

    @staticmethod
    def _check_one(row: dict[str, Any], truth: dict[str, Any], exact_event_tokens: bool) -> float:
        rid = row["request_id"]
        if row.get("kind", "chat") != "chat":
            return SimRun._check_body(row, truth)
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
        assert all(seen >= sent for seen, sent in zip(row["event_t_ns"], written, strict=True)), (
            f"{rid}: a token seen before the server wrote it"
        )
        got, wrote = row["event_tokens"], list(truth["tokens_per_event"])
        wrong = [
            (i, g, w)
            for i, (g, w) in enumerate(zip(got, wrote, strict=True))
            if g != w and (exact_event_tokens or not g == 1 < w)
        ]
        assert not wrong, (
            f"{rid}: tokens per event differ from the server's writes at {len(wrong)} of "
            f"{len(got)} events, (event, counted, written): {wrong[:5]}"
        )
        return float((row["t_first_ns"] - written[0]) / 1e6)

    @staticmethod
    def _check_body(row: dict[str, Any], truth: dict[str, Any]) -> float:
        """A kind answered in one body (embeddings, rerank): its kind, items and input tokens
        are the server's, it has no token events, and its end was read after the server wrote
        the answer; returns that lateness (ms) in place of the first token's."""
        rid = row["request_id"]
        assert (row["kind"], row["n_items"]) == (truth.get("kind"), truth.get("items")), rid
        if row["n_in"] is not None:
            assert row["n_in"] == truth["prompt_tokens"], rid
        assert row["n_events"] == 0 and truth["completion_tokens"] == 0, rid
        written = truth["t_token_ns"]
        assert len(written) == 1, f"{rid}: one answer written"
        assert row["t_end_ns"] >= written[0], f"{rid}: the answer read before the server wrote it"
        return float((row["t_end_ns"] - written[0]) / 1e6)


def run_against_sim(
    report_dir: str | Path,
    engine: str,
    *,
    requests: int = 40,
    users: int = 4,
    sim_args: Sequence[str] = (),
    run_args: Sequence[str] = (),
    profile: str = "fast",
    seed: int = 5,
    timeout_s: float = 120.0,
) -> SimRun:
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
        truth = _truth_of_rows(sim, rows, timeout_s=10)
    report_path = report_dir / "report.json"
    report = orjson.loads(report_path.read_bytes()) if report_path.exists() else {"conservation": {}}
    return SimRun(proc, report, rows, truth)


def _truth_of_rows(
    sim: SimHandle, rows: Sequence[dict[str, Any]], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """The truth records by request id, once every measured request that reached the server has
    its line. Not a count of lines: the log also holds the pre-flight request (and any request
    cut at stop), so a count can be reached while a measured request's line is still unwritten
    (the simulator flushes every 0.5 s); that request then had no truth to check against."""
    wanted = {r["request_id"] for r in rows if r["outcome"] != "connect_error"}
    return sim.wait_truth_for(wanted, timeout_s)


def _written_dir(stderr: str, given: Path) -> Path:
    """Where the run wrote: ``given``, or ``given-2`` … when an earlier run holds it (each run
    has a directory of its own, loadkit/stats/rundir.py; the run's log line names it)."""
    found = re.findall(r"reports go to (.+)$", stderr, flags=re.MULTILINE)
    return Path(found[-1].strip()) if found else given


def _raw_rows(report_dir: Path) -> list[dict[str, Any]]:
    # strict: a line the run left unparsable fails the check instead of vanishing from it.
    return list(read_rows(raw_log_paths(report_dir), strict=True))
