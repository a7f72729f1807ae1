"""The simulator's reasoning and tool-call wire: what a request with `tools` or a bad tool
result gets back, straight from a running simulator (the client side is tested in
tests/engines/test_channels.py and tests/integration/test_reasoning_runs.py)."""

import orjson
import pytest

from loadkit import types as t
from loadkit.client import timer
from loadkit.engines.base import AdapterOptions
from loadkit.engines.vllm import VLLMAdapter
from loadkit.sim import testing as sim_testing
from loadkit.sim.config import ConfigError, get_profile

TIMEOUTS = timer.Timeouts(connect_s=2, first_token_s=5, total_s=10)
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def send(sim, messages, **extra):
    adapter = VLLMAdapter(AdapterOptions(model="sim-fast", api="chat"))
    req = t.GenerationRequest(messages=messages, max_tokens=8, extra_body=extra)
    return timer.run_request(adapter, sim.url, req, timeouts=TIMEOUTS)


def test_tool_result_without_a_matching_call_gets_the_api_400():
    with sim_testing.sim_thread(profile="fast") as sim:
        bad = send(
            sim, [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
        )
        calls = [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]
        good = send(sim, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": calls},
                          {"role": "tool", "tool_call_id": "c1", "content": "found"}])  # fmt: skip
    assert bad.outcome == t.http_error(400) and "'nope' not found" in (bad.error or "")
    assert good.outcome == t.OK and good.t_first_answer_ns is not None


def test_tool_choice_none_answers_in_text_and_fixed_reasoning_is_exact(tmp_path):
    log = str(tmp_path / "truth.jsonl")
    with sim_testing.sim_thread(
        profile="fast", truth_log=log, reasoning_mean_tokens=3, reasoning_dist="fixed"
    ) as sim:
        rec = send(sim, [{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice="none")
    truth = [orjson.loads(line) for line in open(log)]
    assert rec.outcome == t.OK and rec.tool_calls is None and rec.finish_reason == "length"
    assert (rec.n_reasoning, rec.n_reasoning_source, rec.n_answer) == (3, "usage", 5)
    assert truth[0]["reasoning_tokens"] == 3 and truth[0]["t_first_tool_ns"] is None
    assert rec.t_first_answer_ns >= truth[0]["t_first_answer_ns"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("reasoning_dist", "zipf"), ("reasoning_format", "xml"), ("reasoning_mean_tokens", -1.0)],
)
def test_bad_reasoning_options_name_the_option(key, value):
    with pytest.raises(ConfigError, match=key.replace("_", "-")):
        get_profile("fast").replace(**{key: value})


def test_generic_openai_client_gets_tool_calls_too():
    """Without vLLM's continuous usage the chat frame is fixed: tool-call fragments must not use it."""
    from loadkit.engines.openai import OpenAIAdapter

    with sim_testing.sim_thread(profile="fast") as sim:
        adapter = OpenAIAdapter(AdapterOptions(model="sim-fast", api="chat"))
        req = t.GenerationRequest(
            messages=[{"role": "user", "content": "hi"}], max_tokens=6, extra_body={"tools": TOOLS}
        )
        rec = timer.run_request(adapter, sim.url, req, timeouts=TIMEOUTS)
    assert rec.outcome == t.OK, rec.error
    assert rec.tool_calls[0]["name"] == "lookup" and rec.n_tool == 6 and rec.finish_reason == "tool_calls"
