"""Synthetic agent sessions: history, verbatim replies, tool calls, context cap, labels, breakage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from loadkit.workload import Session, load_scenario
from loadkit.workload.errors import ScenarioError

BASE = """
[sessions]
turns = {turns}
user_tokens = 20
output_tokens = 30
think_time_s = {{ dist = "fixed", value = 1.5 }}
"""


def first_session(write_scenario, extra: str = "", turns: str = "4", top: str = "") -> Session:
    sc = load_scenario(write_scenario(top + BASE.format(turns=turns) + extra))
    item = sc.request_source().next_item()
    assert isinstance(item, Session)
    return item


def run(session: Session, reply_words: int = 10) -> list:
    reqs, req = [], session.next_request(None, True)
    while req is not None:
        reqs.append(req)
        req = session.next_request(f"reply{len(reqs)} " + "w " * (reply_words - 1), True)
    return reqs


def test_history_grows_with_verbatim_replies(write_scenario):
    session = first_session(write_scenario)
    reqs = run(session)
    assert len(reqs) == 4 == session.turns_sent == session.turns_planned
    assert session.status == "completed" and session.end_reason == "turns_done"
    assert [r.turn for r in reqs] == [1, 2, 3, 4] and {r.session_id for r in reqs} == {session.session_id}
    assert [r.label for r in reqs] == ["turn1", "turnN", "turnN", "turnN"]
    last = reqs[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant"] * 3 + ["user"]
    assert last[1]["content"] == "reply1 " + "w " * 9  # verbatim, trailing space included
    for earlier, later in zip(reqs, reqs[1:], strict=False):
        assert later.messages[: len(earlier.messages)] == earlier.messages  # a pure extension: cacheable
    assert [r.n_in_target for r in reqs] == [20, 50, 80, 110]
    assert [r.expected_cached_tokens for r in reqs] == [0, 30, 60, 90]
    assert session.think_time_s() == 1.5


def test_failed_turn_breaks_the_session(write_scenario):
    session = first_session(write_scenario)
    assert session.next_request(None, True) is not None
    assert session.next_request(None, False) is None
    assert session.status == "broken" and session.broken_reason == "turn 1 failed"
    assert session.next_request("late", True) is None and session.turns_sent == 1


def test_context_cap_stop_and_truncate(write_scenario):
    stop = first_session(write_scenario, "context = { max_tokens = 100 }\n", turns="10")
    reqs = run(stop)
    # turn k prompt = 20 + 30(k-1) tokens; + max_tokens 30 must stay <= 100
    assert len(reqs) == 2 and stop.end_reason == "context_cap" and stop.status == "completed"
    trunc = first_session(write_scenario, 'context = { max_tokens = 100, policy = "truncate" }\n', turns="6")
    reqs = run(trunc)
    assert len(reqs) == 6 and trunc.end_reason == "turns_done"
    assert all(r.n_in_target + r.max_tokens <= 100 for r in reqs)
    assert reqs[-1].messages[0]["content"] != reqs[0].messages[0]["content"]  # oldest turns dropped
    assert reqs[-1].messages[0]["role"] == "user"


def test_system_prompt_pool_is_shared_and_zipf_popular(write_scenario):
    body = 'system_prompts = { count = 5, tokens = 40, popularity = "zipf", zipf_s = 1.5 }\n'
    sc = load_scenario(
        write_scenario("[sessions]\ncount = 2000\nturns = 1\nuser_tokens = 3\noutput_tokens = 2\n" + body)
    )
    src = sc.request_source()
    firsts = [s.next_request(None, True) for s in iter(src.next_item, None)]
    systems = [r.messages[0]["content"] for r in firsts]
    assert {r.messages[0]["role"] for r in firsts} == {"system"}
    texts = sorted(set(systems), key=systems.count, reverse=True)
    assert len(texts) == 5 and all(len(t.split()) == 40 for t in texts)
    counts = np.array([systems.count(t) for t in texts])
    p = np.arange(1, 6) ** -1.5
    assert stats.chisquare(counts, p / p.sum() * len(systems)).pvalue > 1e-3
    assert stats.chisquare(counts, np.full(5, len(systems) / 5)).pvalue < 1e-3
    # A reused system prompt is expected to be cached on the first turn.
    seen, cached = set(), []
    for r, text in zip(firsts, systems, strict=True):
        cached.append(r.expected_cached_tokens == (40 if text in seen else 0))
        seen.add(text)
    assert all(cached)


def test_tool_calls_text_format(write_scenario):
    tool = (
        "tool = { probability = 1.0, call_tokens = 7, result_tokens = 12, latency_s = 0.25 }\n"
        'labels = { tool = "after_tool" }\n'
    )
    session = first_session(write_scenario, tool, turns="3")
    first = session.next_request(None, True)
    assert session.think_time_s() == 0.25  # tool latency, not think time
    second = session.next_request("I will look it up", True)
    msgs = second.messages
    assert msgs[1]["role"] == "assistant" and msgs[1]["content"].startswith("I will look it up\n<tool_call>")
    assert msgs[2]["role"] == "user" and msgs[2]["content"].startswith("<tool_result>")
    assert len(msgs) == 3  # no new user message after a tool result
    assert second.label == "after_tool" and second.n_in_target == 20 + 5 + 7 + 12
    assert second.expected_cached_tokens == 20 + 5  # the tool call and result are new to the server
    assert first.label == "turn1"
    third = session.next_request("done", True)
    assert third.label == "after_tool" and session.next_request("end", True) is None


def test_tool_calls_openai_format(write_scenario):
    tool = 'tool = { probability = 1.0, call_tokens = 5, result_tokens = 6, format = "openai" }\n'
    session = first_session(write_scenario, tool, turns="2")
    session.next_request(None, True)
    msgs = session.next_request("calling", True).messages
    call = msgs[1]["tool_calls"][0]
    assert msgs[1]["content"] == "calling" and call["type"] == "function"
    assert msgs[2] == {"role": "tool", "content": msgs[2]["content"], "tool_call_id": call["id"]}


def test_completions_api_gets_templated_prompt(write_scenario):
    session = first_session(write_scenario, top='[prompt]\nshape = "prompt"\n', turns="2")
    session.next_request(None, True)
    req = session.next_request("hello there", True)
    assert req.messages is None and req.prompt.startswith("<|user|>\n")
    assert "<|assistant|>\nhello there\n<|user|>\n" in req.prompt and req.prompt.endswith("<|assistant|>\n")


def test_sessions_are_deterministic_and_realised_counts_turns(write_scenario):
    path = write_scenario(
        '[sessions]\ncount = 5\nturns = { dist = "uniform", low = 1, high = 6 }\n'
        'user_tokens = { dist = "uniform", low = 5, high = 50 }\noutput_tokens = 9\n'
    )
    runs = []
    for _ in range(2):
        src = load_scenario(path).request_source()
        runs.append(
            [[(r.n_in_target, r.messages[-1]["content"]) for r in run(s)] for s in iter(src.next_item, None)]
        )
    assert runs[0] == runs[1] and len(runs[0]) == 5
    total = sum(len(s) for s in runs[0])
    assert src.realised()["requests"] == total and src.realised()["sessions_started"] == 5


def test_tool_calls_server_format_answers_the_servers_own_calls(write_scenario):
    tool = (
        'tool = { format = "server", result_tokens = 6, latency_s = 0.5, tool_choice = "required" }\n'
        'labels = { tool = "after_tool" }\n'
    )
    session = first_session(write_scenario, tool, turns="3")
    first = session.next_request(None, True)
    assert first.extra_body["tools"][0]["function"]["name"] == "lookup"
    assert first.extra_body["tool_choice"] == "required"
    calls = [
        {"id": "chatcmpl-tool-1", "name": "lookup", "arguments": '{"query": "x"}'},
        {"id": None, "name": "lookup", "arguments": '{"query": "y"}'},
    ]
    second = session.next_request("", True, None, calls)
    assert session.think_time_s() == 0.5 and second.label == "after_tool"
    reply, res1, res2 = second.messages[-3:]
    assert reply["role"] == "assistant" and reply["content"] is None
    assert [c["id"] for c in reply["tool_calls"]] == ["chatcmpl-tool-1", "call_0_1_1"]
    assert reply["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"query": "x"}'}
    assert (res1["role"], res1["tool_call_id"], res2["tool_call_id"]) == (
        "tool",
        "chatcmpl-tool-1",
        "call_0_1_1",
    )
    assert res1["content"] and res1["content"] != res2["content"]
    # A reply without calls: a fresh user message follows, as in a normal turn.
    third = session.next_request("the answer", True, None, None)
    assert third.messages[-1]["role"] == "user" and third.messages[-2] == {
        "role": "assistant",
        "content": "the answer",
    }
    assert third.label != "after_tool"


def test_tool_server_format_rejects_probability(write_scenario):
    tool = 'tool = { format = "server", probability = 0.5, result_tokens = 6 }\n'
    with pytest.raises(ScenarioError, match="probability.*does not apply"):
        first_session(write_scenario, tool, turns="3")
