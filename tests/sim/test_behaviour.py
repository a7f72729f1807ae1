"""End-to-end behaviour through HTTP: seeded EOS, determinism, slow-client coalescing, preemption."""

from __future__ import annotations

import json
import socket
import time

from loadkit.sim.testing import sim_thread
from tests.sim.rawclient import _read_response, request

BODY = {"model": "m", "prompt": "hello world", "max_tokens": 200, "stream": False}


def test_seeded_eos_stops_early_unless_ignore_eos() -> None:
    with sim_thread("openai", eos_mean_tokens=5.0, decode_base_ms=0.5) as sim:
        free = [request(sim.port, "POST", "/v1/completions", BODY).json() for _ in range(5)]
        exact = request(sim.port, "POST", "/v1/completions", {**BODY, "ignore_eos": True}).json()
        floor = request(sim.port, "POST", "/v1/completions", {**BODY, "min_tokens": 50}).json()
    assert all(r["usage"]["completion_tokens"] < 200 for r in free)
    assert {r["choices"][0]["finish_reason"] for r in free} == {"stop"}
    assert exact["usage"]["completion_tokens"] == 200 and exact["choices"][0]["finish_reason"] == "length"
    assert floor["usage"]["completion_tokens"] >= 50


def test_same_seed_same_answers() -> None:
    def texts(seed: int) -> list[str]:
        with sim_thread("openai", seed=seed, eos_mean_tokens=20.0, decode_base_ms=0.5) as sim:
            return [request(sim.port, "POST", "/v1/completions", {**BODY, "max_tokens": 30}).json()
                    ["choices"][0]["text"] for _ in range(3)]  # fmt: skip

    assert texts(3) == texts(3) != texts(4)


def test_slow_client_gets_coalesced_events(tmp_path: object) -> None:
    truth = f"{tmp_path}/truth.jsonl"
    with sim_thread("openai", truth_log=truth, decode_base_ms=0.2, sndbuf=4096) as sim:
        body = json.dumps({"prompt": "hi", "max_tokens": 3000, "stream": True, "ignore_eos": True}).encode()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fill the pipe quickly
        sock.settimeout(10)
        sock.connect(("127.0.0.1", sim.port))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(1.5)  # do not read while the whole answer is generated
        resp = _read_response(sock)
        sock.close()
        (record,) = sim.wait_truth(1)
    texts = [e["choices"][0]["text"] for e in resp.json_events() if e["choices"]]
    assert resp.complete and sum(len(t.split()) for t in texts) == 3000
    assert sum(record["tokens_per_event"]) == 3000 and max(record["tokens_per_event"]) > 1
    assert len(record["t_token_ns"]) == len(texts) < 3000


def test_small_kv_pool_preempts_but_every_request_completes() -> None:
    import threading

    with sim_thread("openai", num_blocks=40, block_size=16, decode_base_ms=0.5, prefix_caching=False) as sim:
        results: list[int] = []

        def one(i: int) -> None:
            body = {"prompt": f"request {i} " * 20, "max_tokens": 150, "ignore_eos": True}
            results.append(request(sim.port, "POST", "/v1/completions", body, timeout_s=20).json()
                           ["usage"]["completion_tokens"])  # fmt: skip

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        metrics = request(sim.port, "GET", "/metrics").body.decode()
    assert results == [150] * 6
    preempted = [ln for ln in metrics.splitlines() if ln.startswith("vllm:num_preemptions_total")]
    assert float(preempted[0].rsplit(" ", 1)[1]) > 0
