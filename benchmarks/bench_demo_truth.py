"""The README demo scored against the simulators' truth: does the self-check stay quiet on a
run whose timestamps are right (docs/self-check.md, "Why 0.75 %")?

Runs the demo's workload (`loadkit demo`: the `fast` and `big` simulators, 96 users, 20 s)
with each simulator writing its truth log and Locust writing every event's arrival
(`--raw-log-events`), then prints the self-check's warnings, TTFT / ITL error p99 against
the truth and the share of ITL samples off by over 1 ms, and the worst window's coalescing.

    python benchmarks/bench_demo_truth.py            # one run, ~35 s
    python benchmarks/bench_demo_truth.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.cli.runcmd import DEMO_ARGS, LOCUSTFILE
from loadkit.sim.testing import sim_process

MS = 1e6


def locust_args(fast: str, big: str, report: Path) -> list[str]:
    """The demo's own Locust arguments (its -u, -t, SLOs), its simulators replaced by these."""
    rest, skip = [], False
    for arg in DEMO_ARGS:
        if skip:
            skip = False
        elif arg == "--sim":
            skip = True
        elif arg != "--report-dir" and not arg.startswith("reports/"):
            rest.append(arg)
    targets = ["--target", f"fast={fast},engine=vllm", "--target", f"big={big},engine=vllm"]
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", *targets, *rest,
            "--report-dir", str(report), "--raw-log-events"]  # fmt: skip


def errors(rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    ttft, itl = [], []
    for r in rows:
        sent = (truth.get(r["request_id"]) or {}).get("t_token_ns")
        if r["outcome"] != "ok" or not sent or len(sent) != len(r["event_t_ns"]):
            continue
        seen, want = np.asarray(r["event_t_ns"]), np.asarray(sent)
        ttft.append(seen[0] - want[0])
        itl.append(np.abs(np.diff(seen) - np.diff(want)))
    return np.asarray(ttft), np.concatenate(itl) if itl else np.zeros(0)


def one_run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lk-demo-truth-") as tmp:
        report = Path(tmp) / "r"
        with sim_process("--profile", "fast", "--seed", "1000") as fast, \
                sim_process("--profile", "big", "--seed", "1001") as big:  # fmt: skip
            proc = subprocess.run(locust_args(fast.url, big.url, report), capture_output=True, text=True,
                                  timeout=180, env=os.environ.copy())  # fmt: skip
            rows = [json.loads(line) for p in sorted(report.glob("requests*.jsonl"))
                    for line in p.read_text().splitlines() if line.strip()]  # fmt: skip
            truth: dict[str, dict[str, Any]] = {}
            for name, sim in (("fast", fast), ("big", big)):  # the demo's target names
                ids = {r["request_id"] for r in rows if r["outcome"] == "ok" and r["engine"] == name}
                truth |= sim.wait_truth_for(ids)
        doc = json.loads((report / "report.json").read_text())
    ttft, itl = errors(rows, truth)
    health = doc["manifest"]["client_selfcheck"]
    return {"exit": proc.returncode, "warnings": [w for w in doc["warnings"] if w.startswith("client saturat")],
            "requests": len(ttft), "ttft_err_p99_ms": round(float(np.percentile(ttft, 99)) / MS, 3),
            "itl_err_p99_ms": round(float(np.percentile(itl, 99)) / MS, 3),
            "itl_off_over_1ms_pct": round(100 * float(np.mean(itl > MS)), 3),
            "max_coalesced_event_pct": health.get("max_coalesced_event_pct"),
            "max_late_coalesced_event_pct": health.get("max_late_coalesced_event_pct"),
            "max_cpu": health.get("max_cpu")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    for i in range(args.runs):
        print(json.dumps({"run": i + 1, **one_run()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
