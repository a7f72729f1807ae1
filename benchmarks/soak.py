"""Soak benchmark: a long Locust run against the simulator, sampling the client's memory.

Issue 12 asks for "a one-hour soak ... shows flat memory". The simulator runs pinned to one
core, one real Locust process (loadkit's locustfile) on the other; every ``--sample-s`` the
RSS of the Locust process (and its children, for --processes) is written to a JSONL file.
The summary compares RSS after warm-up with RSS at the end and fits a slope (MiB/hour).

    python benchmarks/soak.py --minutes 60 --users 50 --out soak.jsonl

Memory counts as flat when the fitted growth after warm-up stays under --flat-mib-per-hour.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import psutil

from loadkit.sim.testing import sim_process

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="run length (default 60)")
    p.add_argument("--users", type=int, default=50, help="concurrent streams (Locust users)")
    p.add_argument("--decode-ms", type=float, default=10.0, help="simulator decode step (ms per token)")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds between RSS samples")
    p.add_argument("--warmup-min", type=float, default=2.0, help="minutes ignored before fitting the slope")
    p.add_argument("--flat-mib-per-hour", type=float, default=5.0, help="growth still called flat")
    p.add_argument("--out", default="soak.jsonl", help="JSONL file of samples (summary is the last line)")
    p.add_argument(
        "--locustfile",
        default=os.path.join(REPO, "locustfiles", "llm.py"),
        help="locustfile (e.g. benchmarks/clients/locust_memtrace.py to attribute growth)",
    )
    p.add_argument("--client-cpu", type=int, default=1, help="core for Locust (taskset)")
    p.add_argument("--sim-cpu", type=int, default=0, help="core for the simulator")
    return p.parse_args(argv)


def locust_cmd(url: str, args: argparse.Namespace, report_dir: str) -> list[str]:
    run_s = int(args.minutes * 60) + 5
    return ["taskset", "-c", str(args.client_cpu), sys.executable, "-m", "locust",
            "-f", args.locustfile, "--headless", "--host", url,
            "-u", str(args.users), "-r", str(max(1, args.users)), "-t", f"{run_s}s",
            "--report-dir", report_dir, "--no-console-table", "--only-summary"]  # fmt: skip


def heap_mib(pid: int) -> float | None:
    """Resident size of the process's brk heap (glibc malloc), from /proc/<pid>/smaps."""
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            in_heap, kb = False, 0
            for line in fh:
                if not line[0].isupper():
                    in_heap = line.rstrip().endswith("[heap]")
                elif in_heap and line.startswith("Rss:"):
                    kb += int(line.split()[1])
        return round(kb / 1024, 2)
    except OSError:
        return None


def rss_mib(proc: psutil.Process) -> float:
    """RSS of the process and its children (``--processes`` forks workers)."""
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / (1 << 20)


def slope_mib_per_hour(samples: list[dict[str, Any]], warmup_s: float) -> float | None:
    """Least-squares slope of RSS over time after warm-up, in MiB/hour."""
    pts = [(s["t_s"], s["rss_mib"]) for s in samples if s["t_s"] >= warmup_s]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(p[0] for p in pts) / n
    mr = sum(p[1] for p in pts) / n
    var = sum((p[0] - mt) ** 2 for p in pts)
    if var == 0:
        return None
    cov = sum((p[0] - mt) * (p[1] - mr) for p in pts)
    return cov / var * 3600.0


def sample_loop(proc: subprocess.Popen[bytes], args: argparse.Namespace, out: Any) -> list[dict[str, Any]]:
    ps = psutil.Process(proc.pid)
    t0 = time.monotonic()
    samples: list[dict[str, Any]] = []
    while proc.poll() is None:
        try:
            sample = {"t_s": round(time.monotonic() - t0, 1), "rss_mib": round(rss_mib(ps), 2),
                      "heap_mib": heap_mib(ps.pid), "cpu_s": round(sum(ps.cpu_times()[:2]), 2)}  # fmt: skip
        except psutil.NoSuchProcess:
            break
        samples.append(sample)
        out.write(json.dumps(sample) + "\n")
        out.flush()
        time.sleep(args.sample_s)
    return samples


def summarize(samples: list[dict[str, Any]], args: argparse.Namespace, rc: int | None) -> dict[str, Any]:
    warm = [s for s in samples if s["t_s"] >= args.warmup_min * 60]
    slope = slope_mib_per_hour(samples, args.warmup_min * 60)
    return {
        "summary": True, "minutes": round(samples[-1]["t_s"] / 60, 1) if samples else 0,
        "users": args.users, "decode_ms": args.decode_ms, "locust_exit": rc,
        "rss_after_warmup_mib": warm[0]["rss_mib"] if warm else None,
        "rss_end_mib": samples[-1]["rss_mib"] if samples else None,
        "rss_max_mib": max((s["rss_mib"] for s in samples), default=None),
        "slope_mib_per_hour": None if slope is None else round(slope, 2),
        "flat": None if slope is None else abs(slope) <= args.flat_mib_per_hour,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report_dir = os.path.splitext(os.path.abspath(args.out))[0] + "-report"
    sim_args = ["--profile", "fast", "--decode-base-ms", str(args.decode_ms), "--decode-per-seq-ms", "0",
                "--kv-read-ms-per-1k-tokens", "0"]  # fmt: skip
    with sim_process(*sim_args, truth_log=False, cpu=args.sim_cpu) as sim, open(args.out, "w") as out:
        proc = subprocess.Popen(locust_cmd(sim.url, args, report_dir), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=open(args.out + ".log", "wb"))  # fmt: skip
        try:
            samples = sample_loop(proc, args, out)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        summary = summarize(samples, args, rc)
        out.write(json.dumps(summary) + "\n")
    print(json.dumps(summary, indent=2))
    return 0 if summary["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
