"""A minimal aiohttp streaming client shaped like vLLM's serving benchmark (the baseline).

Like ``async_request_openai_completions`` there: ``async for chunk in response.content`` (line
by line), strip, drop the ``data: `` prefix, parse every event with JSON (orjson here), and
take ``time.perf_counter_ns()`` once the event is parsed. Plain asyncio event loop, one shared
session, closed loop per stream.

    python benchmarks/clients/aiohttp_vllm_style.py --url http://127.0.0.1:8000 --streams 100 \\
        --max-tokens 100 --seconds 10 --out /tmp/aio.jsonl
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Usage, parse_args, request_body, write_results  # noqa: E402


async def one_request(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], rid: str
) -> dict[str, Any]:
    events: list[int] = []
    t_send = time.perf_counter_ns()
    async with session.post(url, json=body, headers={"X-Request-ID": rid}) as response:
        if response.status != 200:
            return {"rid": rid, "t_send": t_send, "ev": events, "outcome": f"http_error:{response.status}"}
        async for chunk_bytes in response.content:
            chunk_bytes = chunk_bytes.strip()
            if not chunk_bytes:
                continue
            chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
            if chunk == "[DONE]":
                continue
            data = orjson.loads(chunk)
            choices = data.get("choices")
            if choices and choices[0].get("text"):
                events.append(time.perf_counter_ns())
    return {"rid": rid, "t_send": t_send, "ev": events, "outcome": "ok"}


async def stream_loop(session: aiohttp.ClientSession, url: str, body: dict[str, Any], stop_at: float,
                      rows: list[dict[str, Any]], prefix: str) -> None:  # fmt: skip
    n = 0
    while time.perf_counter() < stop_at:
        n += 1
        rows.append(await one_request(session, url, body, f"{prefix}{n}"))


async def run(args: Any) -> list[dict[str, Any]]:
    url = args.url.rstrip("/") + "/v1/completions"
    body = request_body(args.max_tokens)
    rows: list[dict[str, Any]] = []
    stop_at = time.perf_counter() + args.seconds
    tag = uuid.uuid4().hex[:6]
    timeout = aiohttp.ClientTimeout(total=6 * 3600)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        await asyncio.gather(*(stream_loop(session, url, body, stop_at, rows, f"a{tag}-{i}-")
                               for i in range(args.streams)))  # fmt: skip
    return rows


def main() -> int:
    args = parse_args(None, __doc__.split("\n\n")[0])
    usage = Usage()
    usage.start()
    rows = asyncio.run(run(args))
    write_results(args.out, [r for r in rows if r["outcome"] == "ok"], usage.stop())
    return 0


if __name__ == "__main__":
    sys.exit(main())
