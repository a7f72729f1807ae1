"""Against a server that sends no ``[DONE]``, loadkit's TTFT / TPOT / ITL agree with an
independent client written here on the standard library alone (a socket, a clock read when
each ``recv`` returns, chunked framing and SSE parsed by hand), timing the same requests.

The server runs in its own process and plays the same script to both: first token after
40 ms, then one token every 15 ms, a finish chunk carrying finish_reason and usage, and the
body's end; the connection stays open for the next request (both clients reuse theirs, so
connection set-up, which a TTFT includes, is in neither median). Medians must agree within 1 ms."""

from __future__ import annotations

import json
import socket
import statistics
import time

import pytest

from tests.helpers import variants
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust
from tests.helpers.scripted_server import END_CHUNK, Script, ScriptedServerProcess

pytestmark = pytest.mark.integration

N_TOKENS, FIRST_S, GAP_S, REQUESTS = 12, 0.040, 0.015, 15
SCRIPT = Script(head=variants.HEAD_SSE, writes=[*variants.tokens(N_TOKENS, FIRST_S, GAP_S),
                                                (0, variants.finish(N_TOKENS)), (0, END_CHUNK)], close=False)  # fmt: skip


def http_request(port: int) -> bytes:
    body = json.dumps({"model": "m", "stream": True, "max_tokens": N_TOKENS,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip


class Dechunker:
    """HTTP/1.1 chunked transfer coding, fed as bytes arrive; True from feed once it ended."""

    def __init__(self) -> None:
        self.raw, self.body, self.done = b"", b"", False

    def feed(self, data: bytes) -> bool:
        self.raw += data
        while not self.done:
            line, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                break
            size = int(line.split(b";")[0], 16)
            if len(rest) < size + 2:
                break
            self.body += rest[:size]
            self.raw = rest[size + 2 :]
            self.done = size == 0
        return self.done


def content_events(sse: bytes) -> tuple[int, bytes]:
    """How many complete SSE events carry content, and the unparsed rest."""
    *events, rest = sse.split(b"\n\n")
    count = 0
    for event in events:
        data = event.removeprefix(b"data: ")
        choices = json.loads(data).get("choices") or [{}]
        count += bool((choices[0].get("delta") or {}).get("content"))
    return count, rest


def time_one(sock: socket.socket, port: int) -> tuple[int, list[int]]:
    """(t_send, arrival time of every token event), monotonic ns, read as loadkit defines them:
    t_send just before the request is written, each event stamped when the read that
    completed it returned."""
    request = http_request(port)
    t_send = time.perf_counter_ns()
    sock.sendall(request)
    head, body, sse, events = b"", Dechunker(), b"", []
    while True:
        data = sock.recv(65536)
        t_read = time.perf_counter_ns()
        assert data, "the server closed the connection"
        if b"\r\n\r\n" not in head:
            head += data
            if b"\r\n\r\n" not in head:
                continue
            head, _, data = head.partition(b"\r\n\r\n")
            head += b"\r\n\r\n"
        ended = body.feed(data)
        sse, body.body = sse + body.body, b""
        n, sse = content_events(sse)
        events += [t_read] * n
        if ended:
            return t_send, events


def stdlib_figures(port: int) -> dict[str, float]:
    ttft, tpot, itl = [], [], []
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(REQUESTS):
        t_send, events = time_one(sock, port)
        assert len(events) == N_TOKENS
        ttft.append((events[0] - t_send) / 1e6)
        tpot.append((events[-1] - events[0]) / 1e6 / (N_TOKENS - 1))
        itl += [(b - a) / 1e6 for a, b in zip(events, events[1:], strict=False)]
    sock.close()
    return {
        "ttft_ms": statistics.median(ttft),
        "tpot_ms": statistics.median(tpot),
        "itl_ms": statistics.median(itl),
    }


def test_no_done_stream_figures_agree_with_a_stdlib_client(tmp_path):
    report_dir = tmp_path / "r"
    with ScriptedServerProcess(SCRIPT) as srv:
        proc = run_locust("--headless", "-u", "1", "-r", "1", "-t", "60s", "--max-requests", str(REQUESTS),
                          "--host", srv.url, "--engine", "openai", "--scenario", str(SCENARIOS / "tiny_fixed.toml"),
                          "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
        reference = stdlib_figures(srv.port)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = check_conservation(report_dir)
    (section,) = report["engines"].values()
    rows = raw_records(report_dir)
    assert len(rows) == REQUESTS and all(r["outcome"] == "ok" and r["end"] == "close" for r in rows)
    assert section["ok"] == REQUESTS and section["n_out_sources"] == {"usage": REQUESTS}
    measured = {m: section[m]["p50"] for m in ("ttft_ms", "tpot_ms", "itl_ms")}
    # The script's own figures, to show both clients measured the stream and not each other.
    assert reference["ttft_ms"] == pytest.approx(1e3 * FIRST_S, abs=5)
    assert reference["tpot_ms"] == pytest.approx(1e3 * GAP_S, abs=1.5)
    print(f"loadkit medians {measured}; stdlib client medians {reference}")
    for metric, value in measured.items():
        assert value == pytest.approx(reference[metric], abs=1.0), (metric, measured, reference)
