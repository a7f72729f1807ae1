"""The simulator reasons as long as a request's x-loadkit-reasoning-tokens asks (issue 34), and its
truth log says so; without the header, or on a profile that does not reason, it decides as before.

Before: the header was ignored and every reply's reasoning came from the profile's draw."""

from __future__ import annotations

import http.client

import orjson

from loadkit import types as t
from loadkit.client import timer
from loadkit.engines.base import AdapterOptions
from loadkit.engines.vllm import VLLMAdapter
from loadkit.sim import testing as sim_testing

TIMEOUTS = timer.Timeouts(connect_s=2, first_token_s=5, total_s=10)


def send(sim, max_tokens: int, reasoning: int | None, hint: bool = True) -> t.GenerationRequest:
    adapter = VLLMAdapter(AdapterOptions(model="sim-fast", api="chat"))
    req = t.GenerationRequest(messages=[{"role": "user", "content": "think"}], max_tokens=max_tokens,
                              expected_reasoning_tokens=reasoning, reasoning_hint=hint)  # fmt: skip
    return timer.run_request(adapter, sim.url, req, timeouts=TIMEOUTS)


def truth_of(log: str) -> dict[str, dict]:
    rows = [orjson.loads(line) for line in open(log)]
    return {r["request_id"]: r for r in rows}


def test_the_hint_sets_the_reasoning_length_and_the_truth_log_agrees(tmp_path):
    log = str(tmp_path / "truth.jsonl")
    with sim_testing.sim_thread(
        profile="fast", truth_log=log, reasoning_mean_tokens=3, reasoning_dist="fixed"
    ) as sim:
        hinted = [send(sim, 20, n) for n in (0, 5, 13, 19)]
        capped = send(sim, 8, 30)  # more than the reply: one answer token is left
        drawn = send(sim, 20, None)  # no split: the profile's fixed 3
        unsent = send(sim, 20, 11, hint=False)  # a split, hint off: not sent, the profile decides
        sim.wait_truth(7)
    truth = truth_of(log)
    for rec, n in zip(hinted, (0, 5, 13, 19), strict=True):
        assert rec.outcome == t.OK, rec.error
        row = truth[rec.request_id]
        assert (row["reasoning_hint"], row["reasoning_tokens"]) == (n, n)
        assert (rec.n_reasoning, rec.n_answer, rec.n_out) == (n, 20 - n, 20)
        assert rec.expected_reasoning_tokens == n
    row = truth[capped.request_id]
    assert (row["reasoning_hint"], row["reasoning_tokens"], capped.n_reasoning, capped.n_answer) == (
        30,
        7,
        7,
        1,
    )
    for rec in (drawn, unsent):
        assert (
            truth[rec.request_id]["reasoning_tokens"] == 3 and "reasoning_hint" not in truth[rec.request_id]
        )
        assert rec.n_reasoning == 3


def test_a_profile_without_reasoning_ignores_the_hint(tmp_path):
    log = str(tmp_path / "truth.jsonl")
    with sim_testing.sim_thread(profile="fast", truth_log=log) as sim:
        rec = send(sim, 10, 6)
        sim.wait_truth(1)
    assert rec.outcome == t.OK and truth_of(log)[rec.request_id]["reasoning_tokens"] == 0
    assert rec.n_answer == 10 and not rec.n_reasoning


def test_a_bad_hint_is_a_400_naming_the_header():
    with sim_testing.sim_thread(profile="fast", reasoning_mean_tokens=3) as sim:
        conn = http.client.HTTPConnection(sim.host, sim.port, timeout=5)
        body = orjson.dumps(
            {"model": "sim-fast", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4}
        )
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json", t.REASONING_HINT_HEADER: "lots"})  # fmt: skip
        resp = conn.getresponse()
        text = resp.read().decode()
    assert resp.status == 400 and "x-loadkit-reasoning-tokens: expected a whole number of tokens >= 0" in text
