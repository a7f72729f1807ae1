"""loadkit's own client: ``run_request`` in one gevent greenlet per stream, as Locust runs it.

    python benchmarks/clients/loadkit_gevent.py --url http://127.0.0.1:8000 --streams 500 \\
        --max-tokens 100 --seconds 10 --out /tmp/lk.jsonl

LOADKIT_KERNEL_TIMESTAMPS=0 turns kernel receive timestamps off (user-space stamps only).
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Usage, parse_args, rss_mib, write_results  # noqa: E402

from loadkit.client import stamps  # noqa: E402
from loadkit.client.httpstream import ConnectionPool, Endpoint  # noqa: E402
from loadkit.client.timer import run_request  # noqa: E402
from loadkit.engines.base import AdapterOptions  # noqa: E402
from loadkit.engines.openai import OpenAIAdapter  # noqa: E402
from loadkit.records import RequestRecord  # noqa: E402
from loadkit.selfcheck import SelfCheck  # noqa: E402
from loadkit.types import GenerationRequest  # noqa: E402

UNEVEN = os.environ.get("LOADKIT_BENCH_UNEVEN") == "1"


class CollectStats:
    """Stands in for the stats collector: keeps what the self-check reports."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.manifest: dict[str, Any] = {}

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def set_manifest_fields(self, fields: dict[str, Any]) -> None:
        self.manifest.update(fields)


def stream_loop(adapter: OpenAIAdapter, ep: Endpoint, max_tokens: int, stop_at: float,
                rows: list[dict[str, Any]], prefix: str) -> None:  # fmt: skip
    pool = ConnectionPool()
    rng = random.Random(prefix)
    n = 0

    def sink(rec: RequestRecord) -> None:
        rows.append({"rid": rec.request_id, "t_send": rec.t_send_ns, "ev": rec.event_t_ns,
                     "outcome": rec.outcome, "coalesced": rec.coalesced_reads})  # fmt: skip

    while time.perf_counter() < stop_at:
        n += 1
        # LOADKIT_BENCH_UNEVEN=1: lengths uniform in [0.5, 1.5] x max_tokens, so streams do not
        # all end (and restart) in the same decode step.
        tokens = max(1, round(max_tokens * rng.uniform(0.5, 1.5))) if UNEVEN else max_tokens
        request = GenerationRequest(prompt="hello world", max_tokens=tokens, extra_body={"ignore_eos": True})
        run_request(adapter, ep, request, request_id=f"{prefix}{n}", pool=pool, sink=sink)
    pool.close()


def main() -> int:
    args = parse_args(None, __doc__.split("\n\n")[0], extra=["--cancel-at-stop"])
    # gevent runs queued callbacks (woken greenlets) for up to one switch interval (default
    # 5 ms) before it polls sockets again; a shorter one bounds how long arrivals wait.
    switch_ms = os.environ.get("LOADKIT_SWITCH_INTERVAL_MS")
    if switch_ms:
        sys.setswitchinterval(float(switch_ms) / 1000)
    batch = os.environ.get("LOADKIT_QUEUE_BATCH")  # "lo,hi": reads decoded per greenlet wake-up
    if batch:
        import loadkit.client.reads

        lo, hi = (int(x) for x in batch.split(","))
        loadkit.client.reads.QUEUE_BATCH = (lo, hi)
    adapter = OpenAIAdapter(AdapterOptions(model="sim", api="completions"))
    ep = Endpoint.parse(args.url)
    rows: list[dict[str, Any]] = []
    check = SelfCheck(
        CollectStats(), node="bench", spawn=gevent.spawn, sleep=gevent.sleep
    )  # its verdict on this run
    check.start()
    from loadkit.locust.stalls import HeapFreezer, freeze_heap

    freeze_heap(collect=True)  # as loadkit's Locust listeners do at test start (locust/stalls.py)
    usage = Usage()
    usage.start()
    stop_at = time.perf_counter() + args.seconds
    tag = uuid.uuid4().hex[:6]
    greenlets = [gevent.spawn(stream_loop, adapter, ep, args.max_tokens, stop_at, rows, f"g{tag}-{i}-")
                 for i in range(args.streams)]  # fmt: skip
    freeze_heap(collect=False)  # ... and when spawning completes, then every second while streams run
    freezer = HeapFreezer()
    freezer.start()
    # Memory with every stream in flight (rows of finished requests are kept, so this is
    # the figure to use only while no request has finished yet: long outputs).
    gevent.sleep(max(0.0, stop_at - time.perf_counter()))
    rss_in_flight, finished_before_stop = rss_mib(), len(rows)
    if args.cancel_at_stop:
        gevent.killall(greenlets, timeout=10)
    gevent.joinall(greenlets, timeout=args.seconds + 120)
    freezer.stop()
    check.stop()
    r = stamps.READS
    summary = usage.stop(reads=r.reads, kernel_stamped=r.kernel_stamped, coalesced=r.coalesced,
                         rss_in_flight_mib=rss_in_flight, finished_before_stop=finished_before_stop,
                         selfcheck=check.monitor.health_field(),
                         saturated=check.monitor.manifest_field() is not None,
                         suspect=check.monitor.suspect_list(), causes=check.monitor.cause_list())  # fmt: skip
    write_results(args.out, [row for row in rows if row["outcome"] == "ok"], summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
