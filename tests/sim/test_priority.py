"""Priority scheduling (vLLM's --scheduling-policy priority): lower priority value first, FCFS
among equals, preemption evicts the lowest-priority running sequence."""

from __future__ import annotations

import pytest

from loadkit.sim.config import ConfigError
from loadkit.sim.engine import Scheduler
from loadkit.sim.wire.openai import parse_openai
from tests.sim.test_engine import profile, run_until_done, seq


def with_priority(rid: str, priority: int, n_prompt: int = 32, n_out: int = 4, base: int = 0):
    q = seq(rid, n_prompt, n_out, base)
    q.priority = priority
    return q


def first_token_order(policy: str) -> list[str]:
    s = Scheduler(profile(max_num_seqs=1, scheduling_policy=policy))
    seqs = [
        with_priority("late-low", 5, base=0),
        with_priority("high", 0, base=1000),
        with_priority("low", 5, base=2000),
        with_priority("high2", 0, base=3000),
    ]
    for q in seqs:
        s.add(q)
    times = run_until_done(s, seqs)
    return sorted(times, key=lambda rid: times[rid][0])


def test_priority_orders_the_waiting_queue_and_ties_stay_fcfs():
    assert first_token_order("priority") == ["high", "high2", "late-low", "low"]
    assert first_token_order("fcfs") == ["late-low", "high", "low", "high2"]


def test_preemption_evicts_the_lowest_priority_sequence():
    # 6 blocks of 16 tokens: two 40-token prompts hold 3 blocks each; growing needs a victim.
    s = Scheduler(profile(num_blocks=6, max_num_seqs=2, scheduling_policy="priority"))
    low, high = with_priority("low", 9, 40, 30, 0), with_priority("high", 1, 40, 30, 5000)
    s.add(low)
    s.add(high)
    run_until_done(s, [low, high])
    assert low.n_preempted >= 1 and high.n_preempted == 0


def test_the_request_body_priority_is_read_and_the_policy_validated():
    spec = parse_openai({"prompt": "hi", "max_tokens": 2, "priority": 7}, False, 16, "m")
    assert spec.priority == 7
    assert parse_openai({"prompt": "hi"}, False, 16, "m").priority == 0
    with pytest.raises(ConfigError, match="--scheduling-policy must be fcfs or priority"):
        profile(scheduling_policy="lifo")


def test_with_priority_header_a_bad_value_is_the_requests_400_naming_the_header():
    import http.client
    import json
    from urllib.parse import urlsplit

    from loadkit.sim.testing import sim_process

    body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 2, "stream": False})
    with sim_process("--profile", "fast", "--priority-header", "X-Priority") as sim:
        url = urlsplit(sim.url)
        answers = []
        for value in ("abc", "3"):
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            conn.request(
                "POST", "/v1/completions", body, {"Content-Type": "application/json", "X-Priority": value}
            )
            resp = conn.getresponse()
            answers.append((resp.status, resp.read().decode()))
            conn.close()
    assert (
        answers[0][0] == 400 and "header X-Priority: expected an integer priority, got 'abc'" in answers[0][1]
    )
    assert answers[1][0] == 200
