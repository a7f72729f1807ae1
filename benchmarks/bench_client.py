"""Benchmark: client throughput and timing accuracy against the simulator's truth log.

The simulator runs pinned to one core (``--sim-cpu``), each client in its own process pinned to
the other (``--client-cpus``), closed loop, OpenAI completions SSE with ignore_eos. The
simulator's decode step is exactly ``interval`` ms whatever the batch (per-sequence and KV
costs set to 0), so every running stream gets one token per step: tokens arrive in bursts as
large as the batch. Per request, matched by X-Request-ID:

    TTFT error = client t_first − simulator's write time of the first token event
    ITL error  = (client t_i − t_{i−1}) − (server t_i − t_{i−1}), absolute, per event

Clients: ``loadkit`` (run_request in gevent greenlets, kernel receive timestamps),
``loadkit-user`` (same, user-space stamps only), ``aiohttp`` (vLLM benchmark_serving style).
For each interval × output length and each client the stream count climbs the ladder until
TTFT or ITL error p99 passes ``--limit-ms``; the last accurate point is that client's capacity.

    python benchmarks/bench_client.py                 # full sweep (~10-15 min)
    python benchmarks/bench_client.py --quick         # smoke run (< 60 s)
    python benchmarks/bench_client.py --clients loadkit --intervals 10 --lengths 100 --streams 500
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from loadkit.sim.testing import sim_process

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = {
    "loadkit": ("loadkit_gevent.py", {}),
    "loadkit-user": ("loadkit_gevent.py", {"LOADKIT_KERNEL_TIMESTAMPS": "0"}),
    "aiohttp": ("aiohttp_vllm_style.py", {}),
}


@dataclass
class Point:
    """One run: a client at one stream count, interval and output length."""

    client: str
    streams: int
    interval_ms: float
    max_tokens: int
    processes: int = 1
    requests: int = 0
    unmatched: int = 0
    events_per_s: float | None = None
    tokens_per_s: float | None = None
    cpu_pct: float | None = None
    ttft_err_ms: dict[str, float | None] = field(default_factory=dict)
    itl_err_ms: dict[str, float | None] = field(default_factory=dict)
    coalesced_read_pct: float | None = None
    kernel_stamped_pct: float | None = None
    rss_mib: float | None = None
    accurate: bool = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="loadkit,aiohttp", help=f"comma list of {', '.join(CLIENTS)}")
    p.add_argument("--intervals", default="10,20,5", help="decode step (ms between tokens), comma list")
    p.add_argument("--lengths", default="32,512", help="output tokens per request, comma list (short,long)")
    p.add_argument("--streams", default="50,100,200,300,500,700,1000", help="stream-count ladder, ascending")
    p.add_argument("--seconds", type=float, default=6.0, help="sending time per point (requests then finish)")
    p.add_argument("--processes", type=int, default=1, help="client processes per point, streams split evenly")
    p.add_argument("--client-cpus", default="1", help="cores for the client processes (taskset list)")
    p.add_argument("--sim-cpu", type=int, default=0, help="core for the simulator")
    p.add_argument("--limit-ms", type=float, default=1.0, help="p99 error bound for 'accurate'")
    p.add_argument("--no-stop", action="store_true", help="run the whole ladder even past the first miss")
    p.add_argument("--quick", action="store_true", help="smoke run: one interval, one length, two points")
    p.add_argument("--json", default="", help="write every point here (JSON)")
    args = p.parse_args(argv)
    if args.quick:
        args.intervals, args.lengths, args.streams, args.seconds = "10", "32", "50,200", 3.0
    return args


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def sim_args(interval_ms: float) -> list[str]:
    return ["--profile", "fast", "--decode-base-ms", str(interval_ms), "--decode-per-seq-ms", "0",
            "--kv-read-ms-per-1k-tokens", "0", "--prefill-us-per-token", "0", "--max-num-seqs", "4096",
            "--max-num-batched-tokens", "65536"]  # fmt: skip


def client_cmd(name: str, url: str, streams: int, max_tokens: int, seconds: float, out: str,
               cpus: str, seed: int) -> list[str]:  # fmt: skip
    script = os.path.join(HERE, "clients", CLIENTS[name][0])
    return ["taskset", "-c", cpus, sys.executable, script, "--url", url, "--streams", str(streams),
            "--max-tokens", str(max_tokens), "--seconds", str(seconds), "--out", out, "--seed", str(seed)]  # fmt: skip


def run_clients(pt: Point, url: str, seconds: float, cpus: list[str], tmp: str) -> list[str]:
    """Start the point's client processes together and wait; returns their result files."""
    env = {**os.environ, **CLIENTS[pt.client][1]}
    outs, procs = [], []
    for i in range(pt.processes):
        share = pt.streams // pt.processes + (1 if i < pt.streams % pt.processes else 0)
        out = os.path.join(tmp, f"{pt.client}-{pt.streams}-{i}.jsonl")
        cmd = client_cmd(pt.client, url, share, pt.max_tokens, seconds, out, cpus[i % len(cpus)], i)
        procs.append(subprocess.Popen(cmd, env=env))
        outs.append(out)
    limit = seconds + pt.max_tokens * pt.interval_ms / 1000 * 4 + 60
    for proc in procs:
        proc.wait(timeout=limit)
    return outs


def load_rows(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, summaries = [], []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                obj = json.loads(line)
                (summaries if obj.get("summary") else rows).append(obj)
    return rows, summaries


def errors(rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, int]:
    """TTFT errors and absolute ITL errors (ns) of every matched request; count of unmatched."""
    ttft, itl, unmatched = [], [], 0
    for row in rows:
        tr = truth.get(row["rid"])
        c = row["ev"]
        s = tr["t_token_ns"] if tr else None
        if not s or len(s) != len(c):
            unmatched += 1
            continue
        cs, ss = np.asarray(c, dtype=np.int64), np.asarray(s, dtype=np.int64)
        ttft.append(cs[0] - ss[0])
        itl.append(np.abs(np.diff(cs) - np.diff(ss)))
    itl_all = np.concatenate(itl) if itl else np.zeros(0, dtype=np.int64)
    return np.asarray(ttft, dtype=np.int64), itl_all, unmatched


def pct_ms(values: np.ndarray) -> dict[str, float | None]:
    if len(values) == 0:
        return {"p50": None, "p99": None, "max": None}
    p50, p99 = np.percentile(values, [50, 99]) / 1e6
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3), "max": round(float(values.max()) / 1e6, 3)}


def score(pt: Point, rows: list[dict[str, Any]], summaries: list[dict[str, Any]],
          truth: dict[str, dict[str, Any]], limit_ms: float) -> None:  # fmt: skip
    ttft, itl, pt.unmatched = errors(rows, truth)
    pt.requests = len(rows)
    pt.ttft_err_ms, pt.itl_err_ms = pct_ms(ttft), pct_ms(itl)
    wall = max(s["wall_s"] for s in summaries)
    n_events = sum(len(r["ev"]) for r in rows)
    pt.events_per_s = pt.tokens_per_s = round(n_events / wall)
    pt.cpu_pct = round(100 * sum(s["cpu_s"] for s in summaries) / wall / pt.processes, 1)
    pt.rss_mib = round(sum(s["rss_mib"] for s in summaries), 1)
    reads = sum(s.get("reads", 0) for s in summaries)
    if reads:
        pt.coalesced_read_pct = round(100 * sum(s["coalesced"] for s in summaries) / reads, 2)
        pt.kernel_stamped_pct = round(100 * sum(s["kernel_stamped"] for s in summaries) / reads, 1)
    p99s = (pt.ttft_err_ms["p99"], pt.itl_err_ms["p99"])
    pt.accurate = pt.requests > 0 and pt.unmatched == 0 and all(v is not None and v <= limit_ms for v in p99s)


def run_point(pt: Point, args: argparse.Namespace) -> Point:
    cpus = args.client_cpus.split(",")
    with tempfile.TemporaryDirectory(prefix="lk-bench-") as tmp, \
            sim_process(*sim_args(pt.interval_ms), cpu=args.sim_cpu) as sim:  # fmt: skip
        outs = run_clients(pt, sim.url, args.seconds, cpus, tmp)
        rows, summaries = load_rows(outs)
        truth = {r["request_id"]: r for r in sim.wait_truth(len(rows), timeout_s=5.0)}
        score(pt, rows, summaries, truth, args.limit_ms)
    return pt


def show(pt: Point) -> None:
    t, i = pt.ttft_err_ms, pt.itl_err_ms
    print(f"{pt.client:13s} {pt.interval_ms:5g} ms x{pt.max_tokens:5d} tok {pt.streams:5d} streams/{pt.processes}p | "
          f"TTFT err p50 {t['p50']} p99 {t['p99']} | ITL err p50 {i['p50']} p99 {i['p99']} ms | "
          f"{pt.events_per_s} ev/s cpu {pt.cpu_pct}% coalesced {pt.coalesced_read_pct}% "
          f"rss {pt.rss_mib} MiB n={pt.requests} unmatched={pt.unmatched} {'OK' if pt.accurate else 'MISS'}",
          flush=True)  # fmt: skip


def ladder(client: str, interval: float, length: int, args: argparse.Namespace) -> list[Point]:
    points = []
    for streams in _floats(args.streams):
        pt = run_point(Point(client, int(streams), interval, length, args.processes), args)
        show(pt)
        points.append(pt)
        if not pt.accurate and not args.no_stop:
            break
    return points


def capacity(points: list[Point]) -> Point | None:
    """The highest-throughput accurate point of a ladder (None if none was accurate)."""
    good = [p for p in points if p.accurate]
    return max(good, key=lambda p: p.tokens_per_s or 0) if good else None


def summary_table(results: dict[tuple[float, int], dict[str, list[Point]]], clients: list[str]) -> list[dict[str, Any]]:
    table = []
    for (interval, length), by_client in results.items():
        row: dict[str, Any] = {"interval_ms": interval, "max_tokens": length}
        for c in clients:
            best = capacity(by_client.get(c, []))
            row[c] = None if best is None else {"streams": best.streams, "tokens_per_s": best.tokens_per_s,
                                                "cpu_pct": best.cpu_pct}  # fmt: skip
        base, ours = row.get("aiohttp"), row.get("loadkit")
        row["ratio_loadkit_vs_aiohttp"] = (round(ours["tokens_per_s"] / base["tokens_per_s"], 2)
                                           if ours and base else None)  # fmt: skip
        table.append(row)
    return table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        print(f"unknown client(s) {unknown}; choose from {list(CLIENTS)}", file=sys.stderr)
        return 2
    print(f"load average before: {os.getloadavg()}", flush=True)
    results: dict[tuple[float, int], dict[str, list[Point]]] = {}
    for interval in _floats(args.intervals):
        for length in (int(x) for x in _floats(args.lengths)):
            results[(interval, length)] = {c: ladder(c, interval, length, args) for c in clients}
    table = summary_table(results, clients)
    print(json.dumps(table, indent=1))
    if args.json:
        doc = {"argv": sys.argv, "loadavg_end": os.getloadavg(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "summary": table, "points": [asdict(p) for d in results.values() for ps in d.values() for p in ps]}  # fmt: skip
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
