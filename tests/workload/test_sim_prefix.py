"""Against the embedded simulator: prompt lengths land exactly, and Mooncake prefix hits are real.

The simulator's tokenizer counts one token per four-letter pseudo-word, so the approximate
builder is exact there; its prefix cache must serve exactly the tokens the workload expected.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from loadkit.workload import load_scenario
from loadkit.workload.shipped import shipped_scenarios
from tests.workload.conftest import TRACES

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def complete(url: str, prompt: str) -> dict:
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1, "stream": False}).encode()
    req = urllib.request.Request(
        url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["usage"]


def test_mooncake_prefix_hits_at_the_simulator(write_scenario):
    from loadkit.sim.testing import sim_thread

    path = write_scenario(f"""
        max_requests = 120
        [prompt]
        shape = "prompt"
        [trace]
        format = "mooncake"
        path = "{TRACES / "mooncake-fast25" / "conversation_trace.jsonl"}"
        max_input_tokens = 16384
    """)
    src = load_scenario(path).request_source()
    expected = cached = 0
    with sim_thread(profile="fast", num_blocks=200_000, max_model_len=32768) as sim:
        for req in iter(src.next_item, None):
            usage = complete(sim.url, req.prompt)
            assert usage["prompt_tokens"] == req.n_in_target
            hit = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            assert abs(hit - req.expected_cached_tokens) <= 16  # the simulator caches 16-token blocks
            expected += req.expected_cached_tokens
            cached += hit
    sharing = src.realised()["prefix_sharing"]
    assert cached == pytest.approx(expected, rel=0.01) and cached > 0
    assert sharing["realised_ratio"] == pytest.approx(sharing["trace_ratio_items"], abs=0.002)


def post(url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def send(url: str, req) -> tuple[str, dict]:
    """Non-streaming, max_tokens cut to 8 so the check stays fast; returns (reply text, usage).
    Embeddings and rerank go to their own endpoints (no reply text; usage's prompt_tokens is
    their input, a rerank's total_tokens where the engine says only that)."""
    if req.kind == "embeddings":
        out = post(url, "/v1/embeddings", {"model": "m", "input": req.inputs})
        assert len(out["data"]) == len(req.inputs) == req.n_items
        return "", out["usage"]
    if req.kind == "rerank":
        out = post(url, "/v1/rerank", {"model": "m", "query": req.query, "documents": req.documents})
        assert len(out["results"]) == len(req.documents) == req.n_items
        usage = out["usage"]
        return "", {"prompt_tokens": usage.get("prompt_tokens", usage.get("total_tokens")), **usage}
    body = {"model": "m", "max_tokens": min(req.max_tokens, 8), "stream": False, "ignore_eos": True}
    if req.messages is not None:
        out = post(url, "/v1/chat/completions", body | {"messages": req.messages})
        return out["choices"][0]["message"]["content"], out["usage"]
    out = post(url, "/v1/completions", body | {"prompt": req.prompt})
    return out["choices"][0]["text"], out["usage"]


SHIPPED = list(shipped_scenarios().values())


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenario_runs_against_the_simulator(path):
    from loadkit.sim.testing import sim_thread
    from loadkit.workload import Session, TraceSession

    src = load_scenario(path).request_source()
    with sim_thread(profile="fast", max_model_len=131072, max_num_batched_tokens=131072) as sim:
        for _ in range(3):
            item = src.next_item()
            if isinstance(item, Session | TraceSession):
                req, turns = item.next_request(None, True), 0
                while req is not None and turns < 3:
                    reply, usage = send(sim.url, req)
                    assert usage["prompt_tokens"] >= req.n_in_target
                    chat = req.kind == "chat"  # a [rag] session's chat follows a rerank, not a reply
                    req, turns = item.next_request(reply, True), turns + 1
                    if chat and req is not None and isinstance(item, Session) and req.messages:
                        assert reply in [m["content"].split("\n<tool_call>")[0] for m in req.messages]
                continue
            _, usage = send(sim.url, item)
            if item.kind != "chat":
                assert usage["prompt_tokens"] >= item.n_in_target  # each item's text, as the engine counts it
            elif item.prompt is not None:
                assert usage["prompt_tokens"] == item.n_in_target  # exact on the simulator's tokenizer
            else:
                assert usage["prompt_tokens"] >= item.n_in_target  # plus the chat template
