"""A minimal SSE reader for these tests: stamps each `data:` line as it arrives.

Deliberately independent of loadkit's own decoders, so these tests check the server and
the fixture, not loadkit's client.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 60.0


@dataclass
class Stream:
    t_send_ns: int
    events: list[tuple[int, Any]]  # (arrival perf_counter_ns, decoded JSON)
    done_sentinel: bool  # saw "data: [DONE]"

    def payloads(self) -> list[Any]:
        return [e for _, e in self.events]


def stream_post(url: str, path: str, body: dict[str, Any]) -> Stream:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        conn.connect()
        t_send = time.perf_counter_ns()
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise AssertionError(f"{path}: HTTP {resp.status}: {resp.read()[:500]!r}")
        return _read_events(resp, t_send)
    finally:
        conn.close()


def _read_events(resp: http.client.HTTPResponse, t_send: int) -> Stream:
    events: list[tuple[int, Any]] = []
    done = False
    while line := resp.readline():
        t = time.perf_counter_ns()
        text = line.decode().strip()
        if not text.startswith("data:"):
            continue
        data = text[5:].strip()
        if data == "[DONE]":
            done = True
            continue
        events.append((t, json.loads(data)))
    return Stream(t_send, events, done)
