"""Benchmark: how many streamed tokens/s and concurrent streams the simulator sustains on one core.

The simulator runs pinned to one core (taskset), the load client — a small asyncio raw-socket
client, one keep-alive connection per stream, closed loop — in this process, pinned to another.
Each stream asks for ``--max-tokens`` tokens with ignore_eos, reads until the chunked
terminator, and asks again. After a warm-up, the simulator's own counters give tokens written
and the lateness of every event write vs the scheduled end of its step (p50/p99).

    python benchmarks/bench_sim.py --streams 2000 --decode-ms 20 --seconds 10

Expected decode rate = streams / step time; the report says whether the simulator kept up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import urllib.request
from typing import Any

from loadkit.sim.runner import LatenessStats
from loadkit.sim.testing import sim_process


class StreamClient(asyncio.Protocol):
    """One connection: sends a request, waits for the end of the chunked body, repeats."""

    def __init__(self, request: bytes, stats: dict[str, int], stop: asyncio.Event) -> None:
        self.request = request
        self.stats = stats
        self.stop = stop
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_event_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.stats["bytes"] += len(data)
        if data.endswith(b"\r\n0\r\n\r\n"):
            self.stats["responses"] += 1
            if self.stop.is_set():
                assert self.transport is not None
                self.transport.close()
            else:
                assert self.transport is not None
                self.transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def build_request(port: int, max_tokens: int, prompt_words: int) -> bytes:
    body = json.dumps({
        "model": "sim", "prompt": " ".join(["hello"] * prompt_words), "max_tokens": max_tokens,
        "stream": True, "ignore_eos": True,
    }).encode()  # fmt: skip
    return (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def stats(url: str, pid: int) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/loadkit/sim/stats", timeout=10) as resp:
        out = json.loads(resp.read())
    out["cpu_s"] = cpu_seconds(pid)
    out["lateness_events"] = out["event_lateness"]["events"]
    return out


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process (Linux /proc), so a busy machine does not hide the cost."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(port: int, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    counters = {"bytes": 0, "responses": 0}
    stop = asyncio.Event()
    request = build_request(port, args.max_tokens, args.prompt_words)
    clients = []
    for i in range(args.streams):
        _, proto = await loop.create_connection(
            lambda: StreamClient(request, counters, stop), "127.0.0.1", port
        )
        clients.append(proto)
        if i % 100 == 99:
            await asyncio.sleep(args.ramp_s / max(args.streams / 100, 1))
    url = f"http://127.0.0.1:{port}"
    await asyncio.sleep(args.warmup)
    s0, t0, b0 = await loop.run_in_executor(None, stats, url, pid), time.monotonic(), counters["bytes"]
    await asyncio.sleep(args.seconds)
    s1, t1, b1 = await loop.run_in_executor(None, stats, url, pid), time.monotonic(), counters["bytes"]
    stop.set()
    await asyncio.wait([c.closed for c in clients], timeout=args.max_tokens * args.decode_ms / 1000 + 10)
    return {"s0": s0, "s1": s1, "seconds": t1 - t0, "client_bytes": b1 - b0}


def lateness_window(s0: dict[str, Any], s1: dict[str, Any], key: str) -> dict[str, Any]:
    """Lateness of the measured window alone: the simulator's cumulative histograms at its
    end minus those at its start (the ramp-up's prefill burst is not in the figures)."""
    a, b = s0[key], s1[key]
    window = {i: c - a.get(i, 0) for i, c in b.items() if c - a.get(i, 0)}
    summary = LatenessStats.from_sparse(window).summary()
    summary["max_ms"] = summary["max_ms"] and round(summary["max_ms"], 2)  # a bucket's upper edge
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    sim_args = [
        "--profile",
        "fast",
        "--max-num-seqs",
        str(args.streams + 16),
        "--decode-base-ms",
        str(args.decode_ms),
        "--decode-per-seq-ms",
        "0",
        "--kv-read-ms-per-1k-tokens",
        "0",
        "--prefill-us-per-token",
        "0.5",
        "--max-num-batched-tokens",
        "65536",
        "--num-blocks",
        "400000",
        "--no-prefix-caching",
        "--spec-tokens",
        str(args.spec_tokens),
        "--output-us-per-event",
        str(args.output_us),
    ]
    with sim_process(*sim_args, truth_log=args.truth_log or False, cpu=args.sim_cpu) as sim:
        if args.client_cpu is not None:
            os.sched_setaffinity(0, {args.client_cpu})
        if args.rt:
            # SCHED_FIFO for the simulator and this client (root): other jobs on the machine
            # then cannot delay their wake-ups (the kernel still keeps 5 % for everyone else).
            for pid in (sim.process.pid, 0):
                os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(args.rt))
        try:
            import uvloop

            raw = uvloop.run(drive(sim.port, sim.process.pid, args))
        except ImportError:
            raw = asyncio.run(drive(sim.port, sim.process.pid, args))
    s0, s1, secs = raw["s0"], raw["s1"], raw["seconds"]
    tokens = s1["tokens_written"] - s0["tokens_written"]
    cpu = s1["cpu_s"] - s0["cpu_s"]
    return {
        "streams": args.streams, "decode_step_ms": args.decode_ms, "max_tokens": args.max_tokens,
        "spec_tokens": args.spec_tokens, "events_per_s": round((s1["lateness_events"] - s0["lateness_events"]) / secs),
        "window_s": round(secs, 2), "tokens_per_s": round(tokens / secs),
        "sim_cpu_s": round(cpu, 2), "sim_core_share": round(cpu / secs, 2),
        "tokens_per_cpu_s": round(tokens / cpu) if cpu else None,
        "load_avg_1m": os.getloadavg()[0],
        # spec_tokens=K draws 1..K tokens per event: (K+1)/2 on average.
        "expected_tokens_per_s_if_on_schedule": round(args.streams / (args.decode_ms / 1000) * (args.spec_tokens + 1) / 2),
        "steps_per_s": round((s1["steps"] - s0["steps"]) / secs, 1),
        "client_MB_per_s": round(raw["client_bytes"] / secs / 1e6, 1),
        "resyncs": s1["resyncs"] - s0["resyncs"],
        "event_lateness_ms": lateness_window(s0, s1, "event_lateness_buckets"),
        "step_first_write_lateness_ms": lateness_window(s0, s1, "step_lateness_buckets"),
        "output_us_per_event": args.output_us,
    }  # fmt: skip


def send_baseline(streams: int, size: int, seconds: float, cpu: int, client_cpu: int) -> dict[str, Any]:
    """The floor under any Python server here: a bare loop of send() calls of one event's size,
    one per connection, pinned like the simulator. Reported per CPU-second and per wall-second."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(streams)
    port = srv.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # reader: drains every connection
        os.sched_setaffinity(0, {client_cpu})
        _drain(port, streams, seconds + 2)
        os._exit(0)
    os.sched_setaffinity(0, {cpu})
    conns = [srv.accept()[0] for _ in range(streams)]
    for c in conns:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg, n = b"x" * size, 0
    t0, c0 = time.monotonic(), time.process_time()
    while time.monotonic() - t0 < seconds:
        for c in conns:
            c.send(msg)
        n += len(conns)
    wall, cpu_s = time.monotonic() - t0, time.process_time() - c0
    os.waitpid(pid, 0)
    return {
        "sends_per_s": round(n / wall),
        "sends_per_cpu_s": round(n / cpu_s),
        "us_per_send_cpu": round(cpu_s / n * 1e6, 2),
    }


def _drain(port: int, streams: int, seconds: float) -> None:
    import selectors
    import socket

    sel = selectors.DefaultSelector()
    for _ in range(streams):
        c = socket.create_connection(("127.0.0.1", port))
        c.setblocking(False)
        sel.register(c, selectors.EVENT_READ)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(0.1):
            try:
                key.fileobj.recv(1 << 20)  # type: ignore[union-attr]
            except BlockingIOError:
                pass


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", type=int, default=2000)
    p.add_argument("--decode-ms", type=float, default=20.0)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--prompt-words", type=int, default=32)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--ramp-s", type=float, default=1.0)
    p.add_argument("--sim-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--truth-log", default=None)
    p.add_argument("--spec-tokens", type=int, default=1, help="tokens per decode step and event (1..K)")
    p.add_argument(
        "--output-us",
        type=float,
        default=15.0,
        help="simulator --output-us-per-event: spacing of a step's events (0 = back to back)",
    )
    p.add_argument(
        "--rt", type=int, default=0, help="SCHED_FIFO priority for simulator and client (root; 0 = off)"
    )
    p.add_argument("--baseline", action="store_true", help="also measure a bare send() loop (the floor)")
    args = p.parse_args()
    result = run(args)
    if args.baseline:
        result["bare_send_loop"] = send_baseline(
            min(args.streams, 2000), 250, 4.0, args.sim_cpu, args.client_cpu
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
