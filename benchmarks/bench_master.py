"""What a distributed run's master pays for its workers' stats: N synthetic workers replaying
recorded snapshots at Locust's report interval into the real master-side code.

    python benchmarks/bench_master.py             # N = 10, 50, 100, 200, 500 (~2 min)
    python benchmarks/bench_master.py --quick     # N = 10, 100, two measured rounds (< 30 s)
    python benchmarks/bench_master.py --workers 500 --rounds 5
    python benchmarks/bench_master.py --quick --delivered-cap 20000   # a long run's snapshots

Each N runs in a fresh child process (so RSS is the master's own). In it, one scheduler greenlet sends every synthetic worker's report at its own phase of
the interval (worker w at w/N of it) into a queue, and one consumer greenlet does what
Locust's master does with a ``stats`` message: ``Message.unserialize`` (Locust's msgpack
options) and ``worker_report`` fired to Locust's own stats listener and to loadkit's
(``StatsCollector.accept_snapshot``, what loadkit's listener calls). Every stats interval a
greenlet builds the merged report cooperatively, as the headless console table does; a probe
greenlet sleeps 10 ms at a time and records how late it wakes (the loop's lag).

The payloads are real (benchmarks/data/README.md): what a 2-worker ``locust --processes 2``
run's master received, 40 s into a run of two user classes (chat labels and agent-multiturn
sessions), with ``--warmup`` (two stages). Synthetic worker w replays, in turn, the last six
periodic reports of recorded worker w mod 2 (22-40 s into the run, each cumulative but for the
delivered-load section, a delta: so what differs between them is what changes in a run), its
sequence number, node id and delta starts patched in the serialised bytes (fixed-width fields),
so the sending side costs a copy, not a serialisation. Its delivered-load section is whole in
its first report and then in every ``FULL_EVERY``-th (20th), each worker at its own phase, as a
worker sends it; ``--delivered-cap`` grows those whole sections to the cap.

Figures: CPU per snapshot (process CPU time around the master's handling of one message),
the merged report's CPU time (built atomically after the run, best-of and p99 over repeats),
the process's CPU share over the measured rounds (everything: the synthetic senders too),
wire bytes per message, RSS, and the loop lag p50 / p99 / max.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import struct
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "master_payloads.msgpack.gz")
REPORT_INTERVAL_S = 3.0  # locust.runners.WORKER_REPORT_INTERVAL, which loadkit keeps
SEQ_SENTINEL = 0xDEADBEEF  # a uint32 on the wire (0xce + 4 bytes): patched per send
SEQ_BASE = 0x10000000  # every patched seq stays a uint32, so the width never changes
FROM_SENTINEL = 0xDEADBE00  # a delivered-load delta entry's starts: patched per send too
NODE_ID_LEN = 35  # Locust's ids are hostname_<32 hex>; fixed here so it can be patched
LAG_PROBE_S = 0.01
REPLAYED = 6  # successive recorded reports each synthetic worker cycles through


def load_fixture(path: str = FIXTURE) -> list[dict[str, Any]]:
    """The recorded reports, in arrival order: [{"client_id": ..., "data": {...}}, ...]."""
    import msgpack
    from locust.rpc.protocol import decode

    with gzip.open(path, "rb") as f:
        return list(msgpack.loads(f.read(), raw=False, strict_map_key=False, object_hook=decode))


def steady_reports(records: list[dict[str, Any]], last: int = REPLAYED) -> list[list[dict[str, Any]]]:
    """Per recorded worker, the data dicts of its ``last`` periodic (not final) reports, in order."""
    periodic: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        payload = record["data"].get("loadkit")
        if payload is not None and not payload["final"]:
            periodic.setdefault(record["client_id"], []).append(record["data"])
    return [periodic[k][-last:] for k in sorted(periodic)]


def as_full(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its delivered-load section sent whole: a worker's every ``FULL_EVERY``-th
    periodic snapshot. The recorded delta's requests stand in for the whole section's (a
    40-second run's is a few hundred requests; ``fill_delivered`` grows it to the cap)."""
    sections = dict(data["loadkit"]["sections"])
    entries = [dict(e, **{"from": 0, "lag_from": 0}) for e in sections["delivered"]["entries"]]
    sections["delivered"] = {"full": True, "entries": entries}
    return dict(data, loadkit=dict(data["loadkit"], sections=sections))


def fill_delivered(data: dict[str, Any], cap: int) -> dict[str, Any]:
    """``data`` (a whole section) with its busiest delivered-load entry grown to ``cap``
    requests, its recorded sends repeated one recorded span later each time: what a worker
    sends whole once it has sent ``cap`` requests to one target in one stage (the section keeps
    the first 20,000)."""
    sections = dict(data["loadkit"]["sections"])
    entries = [dict(e) for e in sections["delivered"]["entries"]]
    if not entries:
        return data
    entry = max(entries, key=lambda e: len(e["send_us"]))
    n = len(entry["send_us"])
    span = max(entry["end_us"] + entry["send_us"]) + 1
    for key in ("send_us", "end_us", "scheduled", "lag_us"):
        values = entry[key]  # lag_us: only the scheduled requests have one
        if not values:
            continue
        shift = key in ("send_us", "end_us")
        size = cap * len(values) // n
        entry[key] = [values[i % len(values)] + (i // len(values)) * span * shift for i in range(size)]
    sections["delivered"] = dict(sections["delivered"], entries=entries)
    return dict(data, loadkit=dict(data["loadkit"], sections=sections))


class WireTemplate:
    """One report serialised as Locust sends it, with the seq and node id patched per send,
    and, in a delivered-load delta, each entry's start: what the master holds of that worker,
    so that every replayed delta is appended (as a real worker's new requests are)."""

    def __init__(self, data: dict[str, Any]) -> None:
        from locust.rpc.protocol import Message

        section = data["loadkit"]["sections"]["delivered"]
        self.full = bool(section["full"])
        entries = [dict(e) for e in section["entries"]]
        self.grows = [((e["engine"], e["stage"]), len(e["send_us"]), len(e["lag_us"])) for e in entries]
        sentinels = [SEQ_SENTINEL]
        if not self.full:
            for j, entry in enumerate(entries):
                entry["from"], entry["lag_from"] = FROM_SENTINEL + 2 * j, FROM_SENTINEL + 2 * j + 1
                sentinels += [entry["from"], entry["lag_from"]]
        sections = dict(data["loadkit"]["sections"], delivered=dict(section, entries=entries))
        data = dict(data, loadkit=dict(data["loadkit"], seq=SEQ_SENTINEL, sections=sections))
        blob = Message("stats", data, "N" * NODE_ID_LEN).serialize()
        assert blob.endswith(b"N" * NODE_ID_LEN)
        self.blob = blob
        self.at = []
        for value in sentinels:
            sentinel = b"\xce" + struct.pack(">I", value)
            assert blob.count(sentinel) == 1
            self.at.append(blob.index(sentinel) + 1)

    def make(self, seq: int, node_id: bytes, held: dict[tuple[str, str], list[int]]) -> bytes:
        """The message; ``held``: what the master holds of this worker's entries (updated)."""
        buf = bytearray(self.blob)
        struct.pack_into(">I", buf, self.at[0], SEQ_BASE + seq)
        if self.full:
            held.clear()
        for j, (key, sends, lags) in enumerate(self.grows):
            have = held.setdefault(key, [0, 0])
            if not self.full:
                struct.pack_into(">I", buf, self.at[1 + 2 * j], have[0])
                struct.pack_into(">I", buf, self.at[2 + 2 * j], have[1])
            have[0] += sends
            have[1] += lags
        buf[-NODE_ID_LEN:] = node_id
        return bytes(buf)


def node_id(worker: int) -> bytes:
    return f"bench_{worker:0{NODE_ID_LEN - 6}d}".encode()


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.999999) - 1))]


def master_collector() -> Any:
    """A master's collector as loadkit sets one up: the built-in sections registered, so the
    workers' sections are decoded and merged (the SLOs of the recorded run)."""
    from loadkit.stats import Slo, StatsCollector
    from loadkit.stats.builtin import BuiltinSections

    collector = StatsCollector((Slo("ttft_ms", 1000.0), Slo("tpot_ms", 60.0)))
    BuiltinSections(collector).install()
    collector.reset()
    return collector


def run_one(
    n: int, rounds: int, interval: float, stats_interval: float, report_repeats: int, delivered_cap: int = 0
) -> dict[str, Any]:
    """One master with ``n`` workers: a warm-up (each worker's first snapshot), then ``rounds``
    measured report intervals."""
    import gevent
    from gevent.queue import Queue
    from locust.event import Events
    from locust.rpc.protocol import Message
    from locust.stats import RequestStats, setup_distributed_stats_event_listeners

    # What loadkit's Locust adaptation does on every node, the master included.
    from loadkit.locust.cooperative import install_gevent_yield
    from loadkit.locust.stalls import HeapFreezer, freeze_heap
    from loadkit.stats.turns import cooperative

    install_gevent_yield()  # as loadkit's init does: live reports give the loop turns
    freeze_heap(collect=True)  # as at test start
    from loadkit.stats.delivered import FULL_EVERY

    replayed = steady_reports(load_fixture())
    whole = [[as_full(d) for d in reports] for reports in replayed]
    if delivered_cap:
        whole = [[fill_delivered(d, delivered_cap) for d in reports] for reports in whole]
    recorded = [[WireTemplate(d) for d in reports] for reports in replayed]
    recorded_whole = [[WireTemplate(d) for d in reports] for reports in whole]
    held: list[dict[tuple[str, str], list[int]]] = [{} for _ in range(n)]

    def message(k: int, w: int) -> bytes:  # worker w's k-th report: its recorded worker's next
        # Its delivered-load section whole first and then every FULL_EVERY-th report (each
        # worker at its own phase), as a delta (as recorded) otherwise.
        templates = recorded_whole if k == 0 or (k + w) % FULL_EVERY == 0 else recorded
        reports = templates[w % len(templates)]
        return reports[k % len(reports)].make(k, ids[w], held[w])

    rss_before = rss_mb()
    collector = master_collector()
    events = Events()
    setup_distributed_stats_event_listeners(events, RequestStats())  # Locust's own half
    outcomes: dict[str, int] = {}

    def loadkit_listener(client_id: str, data: dict[str, Any], **_: Any) -> None:
        t = time.process_time_ns()
        result = collector.accept_snapshot(client_id, data["loadkit"])
        if measuring["on"]:
            accept_us.append((time.process_time_ns() - t) / 1000)
        outcomes[result] = outcomes.get(result, 0) + 1

    events.worker_report.add_listener(loadkit_listener)
    inbox: Queue[bytes | None] = Queue()
    per_snapshot_us: list[float] = []
    unpack_us: list[float] = []
    accept_us: list[float] = []
    wire_bytes: list[int] = []
    lags_ms: list[float] = []
    held_ms: list[float] = []
    live_reports_ms: list[float] = []
    measuring = {"on": False}

    def consumer() -> None:  # Locust's MasterRunner.client_listener, for "stats" messages
        while (blob := inbox.get()) is not None:
            t0 = time.process_time_ns()
            msg = Message.unserialize(blob)
            t1 = time.process_time_ns()
            events.worker_report.fire(client_id=msg.node_id, data=msg.data)
            t2 = time.process_time_ns()
            if measuring["on"]:
                per_snapshot_us.append((t2 - t0) / 1000)
                unpack_us.append((t1 - t0) / 1000)
                wire_bytes.append(len(blob))

    def probe() -> None:
        while True:
            t, cpu = time.perf_counter(), time.process_time()
            gevent.sleep(LAG_PROBE_S)
            if measuring["on"]:
                lag = time.perf_counter() - t - LAG_PROBE_S
                lags_ms.append(lag * 1000)
                # The part of the lateness this process's own CPU can account for: on a shared
                # machine the rest is the OS running other jobs, not the loop being held.
                held_ms.append(min(lag, time.process_time() - cpu) * 1000)

    def live_reports() -> None:  # the headless console table's report (statslisteners)
        while not measuring["on"]:
            gevent.sleep(0.01)
        while True:
            gevent.sleep(stats_interval)
            t = time.perf_counter()
            with cooperative():
                collector.report(live=True)
            if measuring["on"]:
                live_reports_ms.append((time.perf_counter() - t) * 1000)

    gc_ms: list[float] = []
    gc_started = [0.0]

    def gc_pause(phase: str, info: dict[str, Any]) -> None:  # collections hold the loop too
        if phase == "start":
            gc_started[0] = time.perf_counter()
        elif measuring["on"]:
            gc_ms.append((time.perf_counter() - gc_started[0]) * 1000)

    gc.callbacks.append(gc_pause)
    ids = [node_id(w) for w in range(n)]
    greenlets = [gevent.spawn(consumer), gevent.spawn(probe), gevent.spawn(live_reports)]
    for w in range(n):  # warm-up: every worker's first snapshot (its state created), at once
        inbox.put(message(0, w))
    while not inbox.empty():
        gevent.sleep(0.01)
    gevent.sleep(0.05)
    # Spawning complete: the heap is frozen again and then every 0.1 s while the run lasts,
    # so collections walk only what arrived since (glue/stalls.py; LOADKIT_GC_FREEZE=0: off).
    freeze_heap(collect=False)
    freezer = HeapFreezer()
    freezer.start()
    measuring["on"] = True  # steady state from here: each worker replaces its snapshot
    cpu_start, start = time.process_time(), time.perf_counter()
    for k in range(1, rounds + 1):
        for w in range(n):
            due = start + (k - 1 + w / n) * interval
            # A timer even when late (never sleep(0)): the loop then runs its other timers, as
            # it does between a real master's socket reads.
            gevent.sleep(max(0.0001, due - time.perf_counter()))
            inbox.put(message(k, w))
    gevent.sleep(max(0.0001, start + rounds * interval - time.perf_counter()))
    inbox.put(None)
    gevent.sleep(0.05)
    cpu = time.process_time() - cpu_start
    wall = time.perf_counter() - start
    measuring["on"] = False
    gevent.killall(greenlets)
    freezer.stop()
    merge_ms = []
    for _ in range(report_repeats):  # the merge itself, atomic (as the final report is built)
        t = time.process_time_ns()
        report = collector.report()
        merge_ms.append((time.process_time_ns() - t) / 1e6)
    requests = sum(g["requests"] for g in report["engines"].values()) if "engines" in report else None
    return {
        "workers": n,
        "snapshots": len(per_snapshot_us),
        "outcomes": outcomes,
        "us_per_snapshot_p50": round(pct(per_snapshot_us, 0.5), 1),
        "us_per_snapshot_p99": round(pct(per_snapshot_us, 0.99), 1),
        "us_per_snapshot_mean": round(sum(per_snapshot_us) / max(1, len(per_snapshot_us)), 1),
        "us_unpack_mean": round(sum(unpack_us) / max(1, len(unpack_us)), 1),
        "us_loadkit_accept_mean": round(sum(accept_us) / max(1, len(accept_us)), 1),
        "wire_bytes_mean": round(sum(wire_bytes) / max(1, len(wire_bytes))),
        "merge_ms_p50": round(pct(merge_ms, 0.5), 1),
        "merge_ms_p99": round(pct(merge_ms, 0.99), 1),
        "live_report_wall_ms": [round(x) for x in live_reports_ms],
        "cpu_share": round(cpu / wall, 3),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "lag_ms_p50": round(pct(lags_ms, 0.5), 2),
        "lag_ms_p99": round(pct(lags_ms, 0.99), 2),
        "lag_ms_max": round(max(lags_ms, default=float("nan")), 2),
        "lag_samples": len(lags_ms),
        "lag_held_ms_p99": round(pct(held_ms, 0.99), 2),
        "lag_held_ms_max": round(max(held_ms, default=float("nan")), 2),
        "gc_collections": len(gc_ms),
        "gc_ms_max": round(max(gc_ms, default=0.0), 1),
        "rss_mb": round(rss_mb(), 1),
        "rss_mb_growth": round(rss_mb() - rss_before, 1),
        "report_requests": requests,
        # Delivered-load deltas the master could not append (0: every replayed delta fitted).
        "delivered_gaps": sum(len(s.sections["delivered"].missing) for s in collector.remote.snapshots()),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| workers | µs CPU per snapshot p50 / p99 (mean: Locust's unpack, loadkit's accept) | merged report CPU ms p50 / p99 | "
            "process CPU share | wire KB | RSS MB (+growth) | loop lag ms p50 / p99 / max | of it held by this process p99 / max |")  # fmt: skip
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(
            f"| {r['workers']} | {r['us_per_snapshot_p50']} / {r['us_per_snapshot_p99']} "
            f"({r['us_per_snapshot_mean']}: {r['us_unpack_mean']}, {r['us_loadkit_accept_mean']}) "
            f"| {r['merge_ms_p50']} / {r['merge_ms_p99']} | {r['cpu_share']:.1%} | {r['wire_bytes_mean'] / 1000:.1f} "
            f"| {r['rss_mb']} (+{r['rss_mb_growth']}) | {r['lag_ms_p50']} / {r['lag_ms_p99']} / {r['lag_ms_max']} "
            f"| {r['lag_held_ms_p99']} / {r['lag_held_ms_max']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="N = 10, 100 and two measured rounds")
    parser.add_argument("--workers", default=None, help="comma-separated N (default 10,50,100,200,500)")
    parser.add_argument(
        "--rounds", type=int, default=None, help="measured report intervals per N (default 4)"
    )
    parser.add_argument("--interval", type=float, default=REPORT_INTERVAL_S)
    parser.add_argument(
        "--stats-interval", type=float, default=5.0, help="live report period (loadkit's default)"
    )
    parser.add_argument("--report-repeats", type=int, default=None)
    parser.add_argument("--delivered-cap", type=int, default=0, metavar="N",
                        help="grow each report's busiest delivered-load entry to N requests (20000: its cap)")  # fmt: skip
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a child's N
    args = parser.parse_args()
    rounds = args.rounds if args.rounds is not None else 2 if args.quick else 4
    repeats = args.report_repeats if args.report_repeats is not None else 3 if args.quick else 7
    if args.one is not None:
        print(
            json.dumps(
                run_one(args.one, rounds, args.interval, args.stats_interval, repeats, args.delivered_cap)
            )
        )
        return
    sweep = args.workers or ("10,100" if args.quick else "10,50,100,200,500")
    rows = []
    for n in (int(x) for x in sweep.split(",")):
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(n), "--rounds", str(rounds),
               "--interval", str(args.interval), "--stats-interval", str(args.stats_interval),
               "--report-repeats", str(repeats), "--delivered-cap", str(args.delivered_cap)]  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
