"""Reasoning, answer and tool-call channels: recorded streams through the real stream timer
(40-byte HTTP chunks over loopback, so tags and JSON split across reads), and the think-tag
splitter cut at every position."""

import pytest

from loadkit import types as t
from loadkit.client import timer
from loadkit.core.channels import ANSWER, REASONING
from loadkit.engines.base import AdapterOptions
from loadkit.engines.channels import ThinkTags
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.vllm import VLLMAdapter
from tests.helpers.stubserver import Answer, stub_server
from tests.helpers.wire import body_bytes

SSE = {"Content-Type": "text/event-stream"}
NDJSON = {"Content-Type": "application/x-ndjson"}
TIMEOUTS = timer.Timeouts(connect_s=2, first_token_s=5, total_s=10)
CHAT = "/v1/chat/completions"


def run(cls, path, fixture, headers=SSE, **options):
    adapter = cls(AdapterOptions(model="m", api="chat", run_options=options))
    answer = Answer(body_bytes(fixture), headers=headers, chunked=True)
    with stub_server({("POST", path): answer}) as (url, _):
        rec = timer.run_request(
            adapter, url, t.GenerationRequest(prompt="hi", max_tokens=16), timeouts=TIMEOUTS
        )
    assert rec.outcome == t.OK, rec.error
    return rec


def at(rec, index):
    return rec.event_t_ns[index]


def test_vllm_reasoning_content_then_answer_counts_from_running_usage():
    rec = run(VLLMAdapter, CHAT, "vllm/chat_continuous_usage_reasoning.sse")
    assert rec.event_tokens == [1, 1, 2, 1]
    assert rec.t_first_reasoning_ns == at(rec, 0) == rec.t_first_ns
    assert rec.t_first_answer_ns == at(rec, 2) == rec.t_reasoning_end_ns and rec.t_last_answer_ns == at(
        rec, 3
    )
    # No reasoning_tokens in this server's usage: counted from the events (the 2-token one is answer).
    assert (rec.n_reasoning, rec.n_reasoning_source, rec.n_answer, rec.n_answer_source) == (
        2,
        "events",
        3,
        "events",
    )
    assert rec.t_first_tool_ns is None and rec.n_tool is None and rec.text == "Héllo world"


def test_vllm_reasoning_field_and_a_mixed_delta_with_usage_counts():
    rec = run(VLLMAdapter, CHAT, "vllm/chat_reasoning_field.sse")
    assert len(rec.event_t_ns) == 4
    assert rec.t_first_reasoning_ns == at(rec, 0)
    # The delta with the last reasoning and the first answer text: both at its arrival.
    assert rec.t_first_answer_ns == rec.t_reasoning_end_ns == at(rec, 2)
    assert (rec.n_reasoning, rec.n_reasoning_source) == (4, "usage")
    assert (rec.n_answer, rec.n_answer_source) == (2, "usage")
    assert rec.text == "Hi there"


def test_vllm_tool_call_fragments_are_put_together_and_timed():
    rec = run(VLLMAdapter, CHAT, "vllm/chat_tool_calls.sse")
    assert rec.finish_reason == "tool_calls" and rec.n_out == 12
    assert rec.t_first_tool_ns == at(rec, 0) == rec.t_first_ns and rec.t_first_answer_ns is None
    assert rec.n_tool == 4 and rec.n_answer == 0 and rec.n_answer_source == "events"
    assert rec.tool_calls == [
        {"id": "chatcmpl-tool-a1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"id": "chatcmpl-tool-b2", "name": "get_time", "arguments": "{}"},
    ]
    assert rec.to_json()["ttftc_ms"] is not None and rec.to_json()["ttfat_ms"] is None


def test_think_tags_split_across_events_and_reads():
    rec = run(VLLMAdapter, CHAT, "vllm/chat_think_tags.sse", think_tags=True)
    assert len(rec.event_t_ns) == 6
    # The opening tag began in the first content event: reasoning starts there.
    assert rec.t_first_reasoning_ns == at(rec, 0)
    assert rec.t_first_answer_ns == at(rec, 4) == rec.t_reasoning_end_ns
    assert (rec.n_reasoning, rec.n_answer) == (4, 2) and rec.text == "Yes."


def test_without_think_tags_the_tags_are_answer_text():
    rec = run(VLLMAdapter, CHAT, "vllm/chat_think_tags.sse")
    assert rec.t_first_reasoning_ns is None and rec.t_first_answer_ns == at(rec, 0)
    assert rec.n_reasoning == 0 and rec.n_answer == 6 and rec.text.startswith("<think>Hmm")


def test_llamacpp_reasoning_content():
    rec = run(LlamaCppAdapter, CHAT, "llamacpp/chat_reasoning.sse")
    assert rec.t_first_reasoning_ns == at(rec, 0) and rec.t_first_answer_ns == at(rec, 2)
    assert (rec.n_reasoning, rec.n_answer, rec.n_out) == (2, 1, 3)


def test_ollama_thinking_then_answer():
    rec = run(OllamaAdapter, "/api/chat", "ollama/chat_thinking.ndjson", NDJSON)
    assert rec.t_first_reasoning_ns == at(rec, 0) and rec.t_first_answer_ns == at(rec, 1)
    assert (rec.n_reasoning, rec.n_answer) == (1, 2) and rec.text == "Hello!"


def test_ollama_whole_tool_call_line():
    rec = run(OllamaAdapter, "/api/chat", "ollama/chat_tool_calls.ndjson", NDJSON)
    assert rec.t_first_reasoning_ns == at(rec, 0) and rec.t_first_tool_ns == at(rec, 2)
    assert rec.tool_calls == [{"id": None, "name": "get_weather", "arguments": '{"city":"Paris"}'}]
    assert rec.n_tool == 1 and rec.n_reasoning == 2 and rec.t_first_answer_ns is None


def test_malformed_tool_call_fragment_names_the_problem():
    body = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":"x"}]}}]}\n\n'
    with stub_server({("POST", CHAT): Answer(body, headers=SSE, chunked=True)}) as (url, _):
        rec = timer.run_request(VLLMAdapter(AdapterOptions(api="chat")), url, t.GenerationRequest(prompt="hi"),
                                timeouts=TIMEOUTS)  # fmt: skip
    assert rec.outcome == t.MALFORMED_STREAM and "tool call fragment" in (rec.error or "")


TAGGED = "<think>a b</think>answer <thin"


@pytest.mark.parametrize("cut", range(len(TAGGED) + 1))
def test_think_tag_splitter_at_every_cut(cut):
    tags = ThinkTags()
    pieces = tags.split(TAGGED[:cut]) + tags.split(TAGGED[cut:])
    reasoning = "".join(p for c, p in pieces if c == REASONING)
    answer = "".join(p for c, p in pieces if c == ANSWER)
    assert (reasoning, answer) == ("a b", "answer ")
    assert tags.held == "<thin" and not tags.inside
