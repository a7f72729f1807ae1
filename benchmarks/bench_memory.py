"""Benchmark: client memory per in-flight stream, and memory over a run.

Runs loadkit's gevent client (benchmarks/clients/loadkit_gevent.py) against the simulator
with long outputs, so that at ``--seconds`` every stream is still in flight; the client
samples its RSS then and cancels the streams. Memory per in-flight stream is the slope of
RSS over the stream counts; ``tokens_so_far`` says how much of each stream the figure holds
(a record keeps one arrival time and one token count per event until the request ends).

    python benchmarks/bench_memory.py --streams 100,500,1000 --interval-ms 50 --seconds 6
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from loadkit.sim.testing import sim_process

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", default="100,500,1000", help="stream counts, comma list")
    p.add_argument("--interval-ms", type=float, default=50.0, help="simulator decode step")
    p.add_argument("--seconds", type=float, default=6.0, help="time in flight before sampling")
    p.add_argument("--client-cpu", default="1")
    p.add_argument("--sim-cpu", type=int, default=0)
    return p.parse_args(argv)


def one(streams: int, args: argparse.Namespace, url: str, tmp: str) -> dict[str, float]:
    out = os.path.join(tmp, f"mem-{streams}.jsonl")
    cmd = ["taskset", "-c", args.client_cpu, sys.executable, os.path.join(HERE, "clients", "loadkit_gevent.py"),
           "--url", url, "--streams", str(streams), "--max-tokens", "100000", "--seconds", str(args.seconds),
           "--out", out, "--cancel-at-stop"]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=args.seconds + 120)
    with open(out) as fh:
        summary = [json.loads(line) for line in fh][-1]
    return {"streams": streams, "rss_in_flight_mib": summary["rss_in_flight_mib"],
            "finished_before_stop": summary["finished_before_stop"],
            "tokens_so_far": round(args.seconds * 1000 / args.interval_ms)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sim_args = ["--profile", "fast", "--decode-base-ms", str(args.interval_ms), "--decode-per-seq-ms", "0",
                "--kv-read-ms-per-1k-tokens", "0", "--prefill-us-per-token", "0", "--max-num-seqs", "4096",
                "--max-model-len", "200000", "--num-blocks", "2000000"]  # fmt: skip
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        sim_process(*sim_args, truth_log=False, cpu=args.sim_cpu) as sim,
    ):
        for n in (int(x) for x in args.streams.split(",")):
            rows.append(one(n, args, sim.url, tmp))
            print(json.dumps(rows[-1]), flush=True)
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        kib = (b["rss_in_flight_mib"] - a["rss_in_flight_mib"]) * 1024 / (b["streams"] - a["streams"])
        print(json.dumps({"kib_per_in_flight_stream": round(kib, 1), "at_tokens_so_far": a["tokens_so_far"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
