"""What every benchmark client shares: options, the request body, and the result file.

A client streams ``--streams`` concurrent closed-loop requests to ``--url`` for ``--seconds``,
then writes one JSON line per finished request (request id, send time, arrival time of every
token event, all ``time.perf_counter_ns()``) and a last line with its own resource use.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any


def parse_args(
    argv: list[str] | None, description: str, extra: list[str] | None = None
) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    for flag in extra or []:
        p.add_argument(
            flag, action="store_true", help="stop streams at --seconds instead of letting them finish"
        )
    p.add_argument("--url", required=True, help="base URL of the simulator")
    p.add_argument("--streams", type=int, default=100, help="concurrent streams")
    p.add_argument("--max-tokens", type=int, default=100, help="output tokens per request")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to send requests")
    p.add_argument("--out", required=True, help="JSONL result file")
    p.add_argument("--seed", type=int, default=0, help="worker index, mixed into request ids")
    return p.parse_args(argv)


def request_body(max_tokens: int) -> dict[str, Any]:
    return {"model": "sim", "prompt": "hello world", "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True}  # fmt: skip


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * resource.getpagesize() / (1 << 20)


def write_results(path: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    with open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.write(json.dumps({"summary": True, **summary}) + "\n")


class Usage:
    """CPU seconds and wall time between start() and stop(), and peak RSS of the stream phase."""

    def start(self) -> None:
        self.cpu0, self.wall0 = cpu_seconds(), time.perf_counter()

    def stop(self, **extra: Any) -> dict[str, Any]:
        wall = time.perf_counter() - self.wall0
        return {"cpu_s": cpu_seconds() - self.cpu0, "wall_s": wall, "rss_mib": rss_mib(), **extra}
