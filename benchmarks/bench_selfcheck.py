"""Calibration of the client self-check against the simulator's truth log: a matrix of runs,
each scored for timing accuracy and for the self-check's verdict, summed into a confusion
table (docs/self-check.md, "How well it is calibrated").

Matrix: clients × streams × interval × output length × scheduling (``default``: what users
run; ``rt``: client and simulator SCHED_FIFO, root) × background hog (``off``; ``on``: a
busy-loop process at normal priority pinned to the client's core, so the client is
starved the way a shared machine starves it) × ``--repeat``. Every point is one
``bench_client.run_point`` (simulator pinned to ``--sim-cpu``, client to the first of
``--client-cpus``), with its TTFT / ITL error p99 against the truth log and what the
client's own self-check said: timestamps suspect or not, and why (busy, starved, stall),
and how many windows it put down to the server writing events together.

    python benchmarks/bench_selfcheck.py --tiny          # proves it runs (~2 min); figures meaningless
    python benchmarks/bench_selfcheck.py --clients loadkit,locust --streams 10,100,300,500 \\
        --intervals 10,20 --lengths 32,256 --sched default,rt --hog off,on --repeat 2 --json matrix.json

"Flagged" = the self-check called the token timestamps suspect (``ttft_ms`` or ``itl_ms``);
a verdict of late sends only (event-loop lag with kernel stamps) is counted apart. A point is
accurate when TTFT and ITL error p99 are both within ``--limit-ms``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_client import CLIENTS, Point, run_point, show  # noqa: E402

TIMING = {"ttft_ms", "itl_ms"}
LOW_CPU_PCT = 30.0  # the target: no warning in 19 of 20 accurate runs at or below this CPU


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--clients",
        default="loadkit",
        help=f"comma list of {', '.join(c for c in CLIENTS if c != 'aiohttp')}",
    )
    p.add_argument("--streams", default="10,100,300,500", help="stream counts, comma list")
    p.add_argument("--intervals", default="10,20", help="decode step (ms between tokens), comma list")
    p.add_argument("--lengths", default="32,256", help="output tokens per request, comma list")
    p.add_argument(
        "--sched", default="default,rt", help="default (normal scheduling) and/or rt (SCHED_FIFO, root)"
    )
    p.add_argument("--hog", default="off,on", help="off and/or on: a busy loop pinned to the client's core")
    p.add_argument("--repeat", type=int, default=1, help="runs of every point")
    p.add_argument("--rt-priority", type=int, default=10, help="SCHED_FIFO priority of the rt points")
    p.add_argument("--seconds", type=float, default=8.0, help="sending time per point")
    p.add_argument("--warmup-s", type=float, default=1.0, help="leave out requests sent in the first seconds")
    p.add_argument("--client-cpus", default="1", help="core of the client (and of the hog)")
    p.add_argument("--sim-cpu", type=int, default=0, help="core of the simulator")
    p.add_argument("--limit-ms", type=float, default=1.0, help="p99 error bound for 'accurate'")
    p.add_argument(
        "--tiny",
        action="store_true",
        help="smoke run: 10 streams x 10 ms x 32, 6.5 s (one self-check window), every sched x hog",
    )
    p.add_argument("--json", default="", help="write every point and the tables here")
    args = p.parse_args(argv)
    if args.tiny:
        args.streams, args.intervals, args.lengths, args.seconds, args.repeat = "10", "10", "32", 6.5, 1
    return args


def point_args(args: argparse.Namespace, sched: str) -> argparse.Namespace:
    """What ``bench_client.run_point`` reads, for one scheduling mode."""
    return argparse.Namespace(seconds=args.seconds, warmup_s=args.warmup_s, processes=1, client_cpus=args.client_cpus,
                              cpu_share=None, sim_cpu=args.sim_cpu, nice=0, limit_ms=args.limit_ms,
                              rt=args.rt_priority if sched == "rt" else 0)  # fmt: skip


@contextmanager
def hog(on: bool, cpu: str) -> Iterator[None]:
    """A busy loop at normal priority on the client's core while the point runs."""
    if not on:
        yield
        return
    proc = subprocess.Popen(["taskset", "-c", cpu, sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def verdict(pt: Point) -> str:
    """What the self-check said about the point: suspect, sends (late sends only), fine."""
    if set(pt.selfcheck_suspect or []) & TIMING:
        return "suspect"
    return "sends" if pt.selfcheck_saturated else "fine"


def tables(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The confusion table (accurate / missed × fine / sends / suspect), the causes named
    for flagged points, and the low-CPU false-alarm rate the issue's target is about."""
    confusion = Counter((r["accurate"], r["verdict"]) for r in rows)
    low = [r for r in rows if r["accurate"] and (r["cpu_pct"] or 0) <= LOW_CPU_PCT]
    return {
        "confusion": {f"{'accurate' if a else 'missed'}/{v}": n for (a, v), n in sorted(confusion.items())},
        "missed_not_flagged": sum(1 for r in rows if not r["accurate"] and r["verdict"] != "suspect"),
        "causes_flagged": dict(
            Counter(c for r in rows if r["verdict"] == "suspect" for c in r["causes"] or ["?"])
        ),
        "low_cpu_accurate": len(low),
        "low_cpu_accurate_flagged": sum(1 for r in low if r["verdict"] != "fine"),
        "server_windows_points": sum(1 for r in rows if r["server_windows"]),
    }


def markdown(t: dict[str, Any]) -> str:
    c = t["confusion"]
    lines = ["| | self-check: fine | self-check: sends late only | self-check: timestamps suspect |",
             "|---|---|---|---|"]  # fmt: skip
    for row in ("accurate", "missed"):
        lines.append(
            f"| {row} | "
            + " | ".join(str(c.get(f"{row}/{v}", 0)) for v in ("fine", "sends", "suspect"))
            + " |"
        )
    lines.append(f"\nmissed and not flagged: {t['missed_not_flagged']}; causes named when flagged: "
                 f"{t['causes_flagged']}; accurate points at <= {LOW_CPU_PCT:g}% CPU: {t['low_cpu_accurate']}, "
                 f"of which warned: {t['low_cpu_accurate_flagged']}; points with server-coalescing windows: "
                 f"{t['server_windows_points']}")  # fmt: skip
    return "\n".join(lines)


def row(pt: Point, sched: str, hog_on: bool, run: int) -> dict[str, Any]:
    return {**asdict(pt), "sched": sched, "hog": hog_on, "run": run, "verdict": verdict(pt),
            "causes": pt.selfcheck_causes, "server_windows": pt.selfcheck_server_windows}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    if unknown := [c for c in clients if c not in CLIENTS or c == "aiohttp"]:
        print(
            f"unknown or unsupported client(s) {unknown}: the self-check runs in loadkit and locust",
            file=sys.stderr,
        )
        return 2
    if "rt" in args.sched and os.geteuid() != 0:
        print("--sched rt needs root (chrt -f)", file=sys.stderr)
        return 2
    print(f"load average before: {os.getloadavg()}", flush=True)
    rows: list[dict[str, Any]] = []
    grid = itertools.product(clients, args.streams.split(","), args.intervals.split(","), args.lengths.split(","),
                             args.sched.split(","), args.hog.split(","), range(args.repeat))  # fmt: skip
    for client, streams, interval, length, sched, hog_mode, run in grid:
        pt = Point(client, int(streams), float(interval), int(length))
        with hog(hog_mode == "on", args.client_cpus.split(",")[0]):
            run_point(pt, point_args(args, sched))
        print(f"[{sched:7s} hog {hog_mode:3s} #{run}] {verdict(pt):7s}", end=" ")
        show(pt)
        rows.append(row(pt, sched, hog_mode == "on", run))
    result = tables(rows)
    print(markdown(result))
    if args.json:
        doc = {"argv": sys.argv, "loadavg_end": os.getloadavg(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "tables": result, "points": rows}  # fmt: skip
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
