"""Micro-benchmark: CPU per event of the request side of the read path, in process.

What ``StreamRun._stream`` does with each read once it is stamped — the loop over a batch,
``maybe_poll``, chunk framing, the SSE fast path, the OpenAI parser, the record — fed from a
reader that hands out pre-built batches of vLLM-shaped reads (one HTTP chunk, one event per
read), so neither sockets nor the machine's scheduling (coalescing) move the figure. The
reader is a ``StampedReader`` as the hub-queued path's (batches of ``--batch`` reads).

    python benchmarks/bench_read_loop.py --events 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import time

from loadkit.client.httpstream import BodyReader, Endpoint, ResponseHead
from loadkit.client.hubreads import maybe_poll
from loadkit.client.timer import StreamRun, Timeouts
from loadkit.engines.base import AdapterOptions
from loadkit.engines.openai import OpenAIAdapter
from loadkit.records import RequestRecord

EVENT = (b'data: {"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"sim",'
         b'"choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null}]}\n\n')  # fmt: skip
CHUNK = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)
DONE = b"%x\r\n%s\r\n" % (len(b"data: [DONE]\n\n"), b"data: [DONE]\n\n")
HEAD = ResponseHead(200, "OK", {"transfer-encoding": "chunked"}, b"", True, 1)


class BatchReader:
    """A StampedReader over pre-built batches; the last batch ends with the end marker."""

    poll = staticmethod(maybe_poll)

    def __init__(self, events: int, batch: int) -> None:
        reads = [(i, CHUNK, False) for i in range(events)] + [(events, DONE, False)]
        self._batches = [reads[i : i + batch] for i in range(0, len(reads), batch)]
        self._batches.reverse()

    def arm(self, deadline_ns: int) -> None:
        return None

    def take(self) -> list[tuple[int, bytes, bool]]:
        return self._batches.pop()

    def take_nowait(self) -> list[tuple[int, bytes, bool]]:
        return []

    def streaming(self) -> None:
        return None

    def close(self) -> None:
        return None


def run(events: int, batch: int, per_request: int) -> float:
    """CPU µs per event over ``events`` events, in requests of ``per_request`` events."""
    adapter = OpenAIAdapter(AdapterOptions(model="sim", api="completions"))
    ep = Endpoint.parse("http://127.0.0.1:1")
    cpu = 0.0
    for _ in range(events // per_request):
        rec = RequestRecord(request_id="r", engine="sim", adapter="openai", t_send_ns=time.perf_counter_ns())
        stream = StreamRun(adapter, ep, rec, Timeouts(), None)
        stream.reader = BatchReader(per_request, batch)  # type: ignore[assignment]
        head = ResponseHead(HEAD.status, HEAD.reason, HEAD.headers, b"", True, 1)
        body = BodyReader.for_head(head)
        stream._drain = lambda body: None  # type: ignore[method-assign]  # no socket to drain
        t0 = time.process_time()
        stream._stream(head, body)
        cpu += time.process_time() - t0
        assert len(rec.event_t_ns) == per_request and rec.end == "marker"
    return cpu / (events // per_request * per_request) * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5, help="runs; the least CPU is kept")
    p.add_argument("--batch", type=int, default=20, help="reads per batch (the hub queue's 8-40)")
    p.add_argument("--per-request", type=int, default=256, help="events per request")
    args = p.parse_args()
    best = min(run(args.events, args.batch, args.per_request) for _ in range(args.repeat))
    print(
        f"read loop: {best:.3f} µs CPU per event (batch {args.batch}, {args.per_request} events per request)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
