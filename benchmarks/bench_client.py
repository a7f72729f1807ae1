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
    python benchmarks/bench_client.py --clients loadkit,locust --transports http,https ...  # TLS vs plain

``--transports https`` serves the simulator's streams through TLS (``loadkit sim --tls-cert``,
a throwaway CA made with trustme) and has every client trust that CA (``SSL_CERT_FILE``;
Locust: ``--ca-bundle``); the truth log still stamps each event's write, before encryption.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import psutil

from loadkit.sim.testing import sim_process

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = {
    "loadkit": ("loadkit_gevent.py", {}),
    "loadkit-user": ("loadkit_gevent.py", {"LOADKIT_KERNEL_TIMESTAMPS": "0"}),
    "aiohttp": ("aiohttp_vllm_style.py", {}),
    "locust": ("", {}),  # a real `locust -f locustfiles/llm.py` process; see run_locust
}
REPO = os.path.dirname(HERE)
SCENARIO = """schema = "loadkit.scenario/1"
name = "bench-client"
seed = 1
duration_s = 3600

[arrival]
model = "closed"
users = {users}

[prompt]
tokenizer = "approx"
api = "completions"

[[parts]]
name = "fixed"
weight = 1.0
input = {{ dist = "fixed", value = 16 }}
output = {{ dist = "fixed", value = {max_tokens} }}
"""


@dataclass
class Point:
    """One run: a client at one stream count, interval and output length."""

    client: str
    streams: int
    interval_ms: float
    max_tokens: int
    processes: int = 1
    transport: str = "http"  # or "https": the simulator serves TLS
    requests: int = 0
    unmatched: int = 0
    events_per_s: float | None = None
    tokens_per_s: float | None = None
    cpu_pct: float | None = None
    cpu_us_per_event: float | None = None
    ttft_err_ms: dict[str, float | None] = field(default_factory=dict)
    itl_err_ms: dict[str, float | None] = field(default_factory=dict)
    coalesced_read_pct: float | None = None
    kernel_stamped_pct: float | None = None
    selfcheck_max_lag_ms: float | None = None
    selfcheck_saturated: bool | None = None
    selfcheck_late_read_pct: float | None = None  # worst window: reads that waited over late_read_ms
    selfcheck_suspect: list[str] | None = None  # figures the self-check called suspect
    selfcheck_causes: list[str] | None = None  # why: busy, starved, stall (loadkit/selfcheck/verdict.py)
    selfcheck_server_windows: int | None = None  # windows whose coalescing it put down to the server
    selfcheck_wait_pct: float | None = None  # worst window: run-queue wait, % of wall time
    # worst window: token events in reads holding several (all; those that also waited: the client's)
    selfcheck_coalesced_event_pct: float | None = None
    selfcheck_late_coalesced_event_pct: float | None = None
    rss_mib: float | None = None
    accurate: bool = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="loadkit,aiohttp", help=f"comma list of {', '.join(CLIENTS)}")
    p.add_argument("--intervals", default="10,20,5", help="decode step (ms between tokens), comma list")
    p.add_argument("--lengths", default="32,512", help="output tokens per request, comma list (short,long)")
    p.add_argument("--streams", default="50,100,200,300,500,700,1000", help="stream-count ladder, ascending")
    p.add_argument("--seconds", type=float, default=6.0, help="sending time per point (requests then finish)")
    p.add_argument("--warmup-s", type=float, default=1.0, help="leave out requests sent in the first seconds")
    p.add_argument(
        "--processes", type=int, default=1, help="client processes per point, streams split evenly"
    )
    p.add_argument(
        "--transports", default="http", help="comma list of http, https: each ladder runs over each"
    )
    p.add_argument("--client-cpus", default="1", help="cores for the client processes (taskset list)")
    p.add_argument(
        "--cpu-share",
        type=float,
        default=None,
        help="cap each client process at this fraction of a core (its own cgroup v1 cpu group, 1 ms "
        "period; root): with 2 cores and the simulator on one, scaling to N processes is "
        "measured as N processes of 1/N core each against 1 process of 1/N core",
    )
    p.add_argument("--sim-cpu", type=int, default=0, help="core for the simulator")
    p.add_argument(
        "--nice",
        type=int,
        default=0,
        help="niceness of simulator and clients (e.g. -10 on a shared machine; negative needs root)",
    )
    p.add_argument(
        "--rt",
        type=int,
        default=0,
        help="run simulator and clients SCHED_FIFO at this priority (chrt; root): on a shared, busy "
        "machine wake-up delays of other processes' making otherwise dominate the errors",
    )
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
               cpus: str, seed: int, nice: int = 0, rt: int = 0) -> list[str]:  # fmt: skip
    script = os.path.join(HERE, "clients", CLIENTS[name][0])
    prio = ["chrt", "-f", str(rt)] if rt else ["nice", "-n", str(nice)]
    return [*prio, "taskset", "-c", cpus, sys.executable, script, "--url", url, "--streams", str(streams),
            "--max-tokens", str(max_tokens), "--seconds", str(seconds), "--out", out, "--seed", str(seed)]  # fmt: skip


CGROUP_CPU = "/sys/fs/cgroup/cpu"


def cap_cpu_share(pid: int, index: int, share: float, rt: bool) -> None:
    """Move a client process into its own cpu cgroup capped at ``share`` of a core (SCHED_FIFO
    processes: RT bandwidth per 1 ms; others: CFS quota, the shortest period the kernel takes),
    so throttled stretches stay far below the inter-token interval."""
    group = os.path.join(CGROUP_CPU, f"loadkit-bench-{index}")
    if not os.path.isdir(CGROUP_CPU):
        sys.exit(f"--cpu-share needs the cgroup v1 cpu controller at {CGROUP_CPU}")
    os.makedirs(group, exist_ok=True)
    if rt:
        files = (("cpu.rt_period_us", 1000), ("cpu.rt_runtime_us", int(share * 1000)))
    else:
        period_us = max(1000, int(1000 / share) + 1)  # the kernel's least CFS quota is 1 ms
        files = (("cpu.cfs_period_us", period_us), ("cpu.cfs_quota_us", int(share * period_us)))
    for name, value in files:
        with open(os.path.join(group, name), "w") as f:
            f.write(str(value))
    with open(os.path.join(group, "tasks"), "w") as f:
        f.write(str(pid))


def tls_files(tmp: str) -> tuple[str, str]:
    """(server key + chain for 127.0.0.1, CA certificate), PEM files from a throwaway CA."""
    import trustme

    ca = trustme.CA()
    server, ca_pem = os.path.join(tmp, "server.pem"), os.path.join(tmp, "ca.pem")
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(server)
    ca.cert_pem.write_to_path(ca_pem)
    return server, ca_pem


def run_clients(pt: Point, url: str, args: argparse.Namespace, tmp: str) -> list[str]:
    """Start the point's client processes together and wait; returns their result files."""
    env = {**os.environ, **CLIENTS[pt.client][1]}
    if pt.transport == "https":
        env["SSL_CERT_FILE"] = os.path.join(tmp, "ca.pem")  # every client's default context trusts it
    outs, procs = [], []
    for i in range(pt.processes):
        share = pt.streams // pt.processes + (1 if i < pt.streams % pt.processes else 0)
        out = os.path.join(tmp, f"{pt.client}-{pt.streams}-{i}.jsonl")
        cpus = args.client_cpus.split(",")
        cmd = client_cmd(pt.client, url, share, pt.max_tokens, point_seconds(pt, args), out, cpus[i % len(cpus)], i,
                         args.nice, args.rt)  # fmt: skip
        procs.append(subprocess.Popen(cmd, env=env))
        if args.cpu_share:
            cap_cpu_share(procs[-1].pid, i, args.cpu_share, bool(args.rt))
        outs.append(out)
    limit = point_seconds(pt, args) + pt.max_tokens * pt.interval_ms / 1000 * 4 + 60
    for proc in procs:
        proc.wait(timeout=limit)
    return outs


def run_locust(pt: Point, url: str, args: argparse.Namespace, tmp: str) -> list[str]:
    """The Locust path users run: one `locust --headless` process, loadkit's locustfile, a
    closed-loop scenario of fixed lengths, `--raw-log`; its CPU sampled with psutil."""
    scenario = os.path.join(tmp, "scenario.toml")
    with open(scenario, "w") as fh:
        fh.write(SCENARIO.format(users=pt.streams, max_tokens=pt.max_tokens))
    report = os.path.join(tmp, "report")
    prio = ["chrt", "-f", str(args.rt)] if args.rt else ["nice", "-n", str(args.nice)]
    cmd = [*prio, "taskset", "-c", args.client_cpus.split(",")[0], sys.executable, "-m", "locust",
           "-f", os.path.join(REPO, "locustfiles", "llm.py"), "--headless", "--host", url, "-u", str(pt.streams),
           "-r", str(pt.streams), "-t", f"{math.ceil(point_seconds(pt, args))}s", "--scenario", scenario, "--api", "completions",
           "--report-dir", report, "--raw-log", "--raw-log-events", "--no-console-table", "--only-summary", "--stop-timeout",
           str(int(pt.max_tokens * pt.interval_ms / 1000 * 3 + 5))]  # fmt: skip
    if pt.transport == "https":
        cmd += ["--ca-bundle", os.path.join(tmp, "ca.pem")]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "locust.log"), "wb")
    )
    t0 = time.perf_counter()
    cpu_s = sample_cpu(proc)
    out = os.path.join(tmp, "locust.jsonl")
    n = convert_raw_log(report, out, cpu_s, time.perf_counter() - t0)
    if n == 0:
        with open(os.path.join(tmp, "locust.log"), errors="replace") as fh:
            print("locust produced no requests; its log ends:\n" + fh.read()[-1500:], file=sys.stderr)
    return [out]


def sample_cpu(proc: subprocess.Popen[bytes]) -> float:
    """CPU seconds of a running process, last value seen before it exits."""
    ps, cpu = psutil.Process(proc.pid), 0.0
    while proc.poll() is None:
        try:
            cpu = sum(ps.cpu_times()[:2])
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    return cpu


def convert_raw_log(report: str, out: str, cpu_s: float, wall_s: float) -> int:
    """Raw-log lines → the client result format: every event's arrival (``--raw-log-events``)."""
    rows: list[dict[str, Any]] = []
    for name in sorted(os.listdir(report)) if os.path.isdir(report) else []:
        if name.startswith("requests") and name.endswith(".jsonl"):
            with open(os.path.join(report, name)) as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
    with open(out, "w") as fh:
        for r in rows:
            if r.get("outcome") == "ok" and r.get("t_first_ns") is not None:
                fh.write(json.dumps({"rid": r["request_id"], "t_send": r["t_send_ns"], "ev": r["event_t_ns"],
                                     "coalesced": r["coalesced_reads"]}) + "\n")  # fmt: skip
        fh.write(json.dumps({"summary": True, "cpu_s": cpu_s, "wall_s": wall_s, "rss_mib": 0.0,
                             **selfcheck_summary(report)}) + "\n")  # fmt: skip
    return len(rows)


def selfcheck_summary(report: str) -> dict[str, Any]:
    """The Locust process's own read counts and self-check verdict, from its report.json."""
    try:
        with open(os.path.join(report, "report.json")) as fh:
            manifest = json.load(fh)["manifest"]
    except (OSError, ValueError, KeyError):
        return {}
    health, saturation = manifest.get("client_selfcheck") or {}, manifest.get("client_saturation")
    reads = health.get("reads") or 0
    if not reads:
        return {}
    return {"reads": reads, "kernel_stamped": round(reads * (health.get("kernel_stamped_pct") or 0) / 100),
            "coalesced": round(reads * (health.get("coalesced_read_pct") or 0) / 100), "selfcheck": health,
            "saturated": saturation is not None, "suspect": (saturation or {}).get("suspect", []),
            "causes": (saturation or {}).get("causes", [])}  # fmt: skip


def load_rows(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                obj = json.loads(line)
                (summaries if obj.get("summary") else rows).append(obj)
    return rows, summaries


def errors(
    rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]]
) -> tuple[np.ndarray, np.ndarray, int]:
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
    return {
        "p50": round(float(p50), 3),
        "p99": round(float(p99), 3),
        "max": round(float(values.max()) / 1e6, 3),
    }


def after_warmup(rows: list[dict[str, Any]], warmup_s: float) -> list[dict[str, Any]]:
    """Requests sent after the first ``warmup_s`` (connects, imports, spawning)."""
    if not rows:
        return rows
    t0 = min(r["t_send"] for r in rows)
    return [r for r in rows if r["t_send"] >= t0 + warmup_s * 1e9]


def score(pt: Point, rows: list[dict[str, Any]], summaries: list[dict[str, Any]],
          truth: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:  # fmt: skip
    """Errors from requests after warm-up; throughput and CPU from all of them."""
    measured = after_warmup(rows, args.warmup_s)
    ttft, itl, pt.unmatched = errors(measured, truth)
    pt.requests = len(measured)
    pt.ttft_err_ms, pt.itl_err_ms = pct_ms(ttft), pct_ms(itl)
    wall = max(s["wall_s"] for s in summaries)
    n_events = sum(r.get("n_events", len(r["ev"])) for r in rows)
    pt.events_per_s = pt.tokens_per_s = round(n_events / wall)
    cpu_s = sum(s["cpu_s"] for s in summaries)
    pt.cpu_pct = round(100 * cpu_s / wall / pt.processes, 1)
    pt.cpu_us_per_event = round(1e6 * cpu_s / n_events, 2) if n_events else None
    pt.rss_mib = round(sum(s["rss_mib"] for s in summaries), 1)
    reads = sum(s.get("reads", 0) for s in summaries)
    if reads:
        pt.coalesced_read_pct = round(100 * sum(s["coalesced"] for s in summaries) / reads, 2)
        pt.kernel_stamped_pct = round(100 * sum(s["kernel_stamped"] for s in summaries) / reads, 1)
    checks = [s for s in summaries if "selfcheck" in s]
    if checks:
        lags = [s["selfcheck"]["max_lag_ms"] for s in checks if s["selfcheck"]["max_lag_ms"] is not None]
        pt.selfcheck_max_lag_ms = max(lags) if lags else None
        pt.selfcheck_saturated = any(s["saturated"] for s in checks)
        late = [s["selfcheck"]["max_late_read_pct"] for s in checks
                if s["selfcheck"].get("max_late_read_pct") is not None]  # fmt: skip
        pt.selfcheck_late_read_pct = max(late) if late else None
        pt.selfcheck_suspect = sorted({name for s in checks for name in s.get("suspect") or []})
        pt.selfcheck_causes = sorted({name for s in checks for name in s.get("causes") or []})
        pt.selfcheck_server_windows = sum((s["selfcheck"].get("server_coalesced") or {}).get("windows", 0)
                                          for s in checks)  # fmt: skip
        pt.selfcheck_wait_pct, pt.selfcheck_coalesced_event_pct, pt.selfcheck_late_coalesced_event_pct = (
            max((v for s in checks if (v := s["selfcheck"].get(key)) is not None), default=None)
            for key in ("max_run_queue_wait_pct", "max_coalesced_event_pct", "max_late_coalesced_event_pct")
        )
    p99s = (pt.ttft_err_ms["p99"], pt.itl_err_ms["p99"])
    pt.accurate = (
        pt.requests > 0 and pt.unmatched == 0 and all(v is not None and v <= args.limit_ms for v in p99s)
    )


def prioritize(pid: int, args: argparse.Namespace) -> None:
    if args.rt:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(args.rt))
    elif args.nice:
        psutil.Process(pid).nice(args.nice)


def point_seconds(pt: Point, args: argparse.Namespace) -> float:
    """Sending time long enough that requests sent after the warm-up finish a few rounds."""
    request_s = pt.max_tokens * pt.interval_ms / 1000
    return max(args.seconds, args.warmup_s + 2 * request_s)


def run_point(pt: Point, args: argparse.Namespace) -> Point:
    with tempfile.TemporaryDirectory(prefix="lk-bench-") as tmp:
        tls = ["--tls-cert", tls_files(tmp)[0]] if pt.transport == "https" else []
        return _run_point_in(pt, args, tmp, [*sim_args(pt.interval_ms), *tls])


def _run_point_in(pt: Point, args: argparse.Namespace, tmp: str, sim_argv: list[str]) -> Point:
    with sim_process(*sim_argv, cpu=args.sim_cpu) as sim:
        if sim.process is not None:
            prioritize(sim.process.pid, args)
        runner = run_locust if pt.client == "locust" else run_clients
        outs = runner(pt, sim.url, args, tmp)
        rows, summaries = load_rows(outs)
        truth = truth_of(sim, rows)
        score(pt, rows, summaries, truth, args)
    return pt


def truth_of(sim: Any, rows: list[dict[str, Any]], timeout_s: float = 5.0) -> dict[str, dict[str, Any]]:
    """The simulator's truth for every measured request (waiting for each one's line: by count,
    the last ok request's was once still on its way and scored "unmatched")."""
    return sim.wait_truth_for({r["rid"] for r in rows}, timeout_s)


def show(pt: Point) -> None:
    t, i = pt.ttft_err_ms, pt.itl_err_ms
    print(f"{pt.client:13s} {pt.transport:5s} {pt.interval_ms:5g} ms x{pt.max_tokens:5d} tok {pt.streams:5d} streams/{pt.processes}p | "
          f"TTFT err p50 {t['p50']} p99 {t['p99']} | ITL err p50 {i['p50']} p99 {i['p99']} ms | "
          f"{pt.events_per_s} ev/s cpu {pt.cpu_pct}% {pt.cpu_us_per_event} us/ev coalesced {pt.coalesced_read_pct}% "
          f"rss {pt.rss_mib} MiB selfcheck lag {pt.selfcheck_max_lag_ms} late reads {pt.selfcheck_late_read_pct}% wait {pt.selfcheck_wait_pct}% coalesced events {pt.selfcheck_coalesced_event_pct}% (late {pt.selfcheck_late_coalesced_event_pct}%) sat {pt.selfcheck_saturated} cause {','.join(pt.selfcheck_causes or []) or '-'} server-windows {pt.selfcheck_server_windows} suspect {','.join(pt.selfcheck_suspect or []) or '-'} n={pt.requests} unmatched={pt.unmatched} {'OK' if pt.accurate else 'MISS'}",
          flush=True)  # fmt: skip


def ladder(
    client: str, interval: float, length: int, args: argparse.Namespace, transport: str = "http"
) -> list[Point]:
    points = []
    for streams in _floats(args.streams):
        pt = run_point(
            Point(client, int(streams), interval, length, args.processes, transport=transport), args
        )
        show(pt)
        points.append(pt)
        if not pt.accurate and not args.no_stop:
            break
    return points


def capacity(points: list[Point]) -> Point | None:
    """The highest-throughput accurate point of a ladder (None if none was accurate)."""
    good = [p for p in points if p.accurate]
    return max(good, key=lambda p: p.tokens_per_s or 0) if good else None


def summary_table(
    results: dict[tuple[float, int, str], dict[str, list[Point]]], clients: list[str]
) -> list[dict[str, Any]]:
    table = []
    for (interval, length, transport), by_client in results.items():
        row: dict[str, Any] = {"interval_ms": interval, "max_tokens": length, "transport": transport}
        for c in clients:
            best = capacity(by_client.get(c, []))
            row[c] = None if best is None else {"streams": best.streams, "tokens_per_s": best.tokens_per_s,
                                                "cpu_pct": best.cpu_pct, "cpu_us_per_event": best.cpu_us_per_event,
                                                "ttft_err_p99_ms": best.ttft_err_ms.get("p99"),
                                                "itl_err_p99_ms": best.itl_err_ms.get("p99")}  # fmt: skip
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
    results: dict[tuple[float, int, str], dict[str, list[Point]]] = {}
    for interval in _floats(args.intervals):
        for length in (int(x) for x in _floats(args.lengths)):
            for transport in args.transports.split(","):
                results[(interval, length, transport)] = {c: ladder(c, interval, length, args, transport)
                                                          for c in clients}  # fmt: skip
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
