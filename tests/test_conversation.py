"""Conversation: history, turn labels, session ids, and how a session is counted when it closes."""

from __future__ import annotations

import pytest

from loadkit.conversation import Conversation
from loadkit.records import RequestRecord
from loadkit.types import GenerationRequest


class FakeServer:
    """Answers each request with a scripted outcome; keeps what it was sent."""

    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[GenerationRequest] = []

    def __call__(self, request: GenerationRequest) -> RequestRecord:
        self.sent.append(request)
        outcome = self.outcomes.pop(0)
        n = len(self.sent)
        return RequestRecord(f"r{n}", "e", "openai", label=request.label, outcome=outcome,
                             text=f"reply {n}" if outcome == "ok" else "", n_in=100 * n, n_out=10)  # fmt: skip


def conversation(server: FakeServer, ended: list[Conversation], **kw) -> Conversation:
    return Conversation(server, ended.append, "S-1", **kw)


def test_each_turn_sends_the_whole_history_and_appends_the_reply():
    server, ended = FakeServer(["ok", "ok", "ok"]), []
    with conversation(server, ended, name="agent", system="be brief") as conv:
        conv.chat("hi", max_tokens=7)
        conv.add("tool", "42", tool_call_id="c1")
        conv.chat(max_tokens=9, temperature=0)
        conv.chat("thanks", label="closing")
    first, second, third = server.sent
    assert first.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert second.messages[-2:] == [{"role": "assistant", "content": "reply 1"},
                                    {"role": "tool", "content": "42", "tool_call_id": "c1"}]  # fmt: skip
    assert third.messages[-1] == {"role": "user", "content": "thanks"}
    assert [r.label for r in server.sent] == ["agent:turn1", "agent:turnN", "closing"]
    assert [r.turn for r in server.sent] == [1, 2, 3] and {r.session_id for r in server.sent} == {"S-1"}
    assert (first.max_tokens, second.max_tokens, second.extra_body) == (7, 9, {"temperature": 0})
    # Later turns expect the last prompt and reply (as the server counted them) to be cached.
    assert [r.expected_cached_tokens for r in server.sent] == [None, 110, 210]
    assert (
        ended == [conv] and conv.status == "completed" and conv.end_reason == "done" and conv.turns_sent == 3
    )


def test_a_failed_turn_appends_nothing_and_breaks_the_session_by_its_outcome():
    server, ended = FakeServer(["ok", "http_error:503", "ok"]), []
    conv = conversation(server, ended)
    conv.chat("a")
    assert not conv.chat("b").ok
    conv.chat()  # the task may resend the same history
    assert server.sent[2].messages == server.sent[1].messages
    assert server.sent[2].expected_cached_tokens is None  # the last turn failed: unknown
    conv.close()
    conv.close()  # counted once
    assert ended == [conv] and conv.status == "broken" and conv.broken_reason == "http_error:503"
    with pytest.raises(RuntimeError, match="closed"):
        conv.chat("again")


class Stopped(Exception):
    """Stands for Locust's StopUser: the run stopping the task on purpose."""


def test_a_block_left_by_the_tasks_own_exception_is_a_task_error_at_the_turn_never_sent():
    server, ended = FakeServer(["ok"]), []
    with pytest.raises(KeyError), conversation(server, ended, stops=(Stopped,)) as conv:
        conv.chat("a")
        raise KeyError("tool")  # the task's own code, after an ok turn 1
    assert conv.status == "broken" and conv.broken_reason == "task_error" and conv.broken_at_turn == 2
    with conversation(server, ended):
        pass
    assert ended == [conv]  # an unused conversation is not counted


def test_a_block_left_by_a_stop_is_cancelled_and_a_failed_turn_keeps_its_own_outcome_and_turn():
    import gevent

    server, ended = FakeServer(["ok", "ok", "http_error:503"]), []
    with pytest.raises(Stopped), conversation(server, ended, stops=(Stopped,)) as stopped:
        stopped.chat("a")
        raise Stopped()
    with pytest.raises(gevent.GreenletExit), conversation(server, ended) as killed:
        killed.chat("a")
        raise gevent.GreenletExit()  # not an Exception: the greenlet was killed (test stop)
    with pytest.raises(ValueError), conversation(server, ended) as failed:
        assert not failed.chat("a").ok
        raise ValueError("gave up")  # after a failed turn: the turn's outcome is the session's
    assert [(c.broken_reason, c.broken_at_turn) for c in ended] == [("cancelled", 2), ("cancelled", 2),
                                                                    ("http_error:503", 1)]  # fmt: skip


def test_an_exception_from_the_send_itself_breaks_the_session_at_that_turn():
    def send(request):
        raise RuntimeError("the request could not be built")

    ended: list[Conversation] = []
    with pytest.raises(RuntimeError), Conversation(send, ended.append, "S-2") as conv:
        conv.chat("a")
    assert (conv.broken_reason, conv.broken_at_turn, conv.turns_sent) == ("task_error", 1, 1) and ended == [
        conv
    ]


def test_tool_calls_go_back_as_the_protocol_expects_against_the_simulator():
    """The simulator calls the first tool when a request carries `tools` and answers 400 to a
    tool result whose tool_call_id no earlier assistant call has."""
    from loadkit.client import timer
    from loadkit.engines.base import AdapterOptions
    from loadkit.engines.vllm import VLLMAdapter
    from loadkit.sim.testing import sim_thread

    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    adapter = VLLMAdapter(AdapterOptions(model="sim-fast", api="chat"))
    with sim_thread(profile="fast") as sim:
        limits = timer.Timeouts(first_token_s=5, total_s=10)
        conv = Conversation(
            lambda req: timer.run_request(adapter, sim.url, req, timeouts=limits), lambda c: None, "S-tools"
        )
        first = conv.chat("weather?", max_tokens=6, tools=tools)
        assert first.ok and first.finish_reason == "tool_calls"
        reply = conv.history[-1]
        assert reply["content"] is None and reply["tool_calls"][0]["id"] == first.tool_calls[0]["id"]
        with pytest.raises(ValueError, match="1 tool call"):
            conv.answer_tools("a", "b")
        conv.answer_tools("sunny")
        second = conv.chat(max_tokens=6)  # no tools this time: an answer in text
    assert second.ok, second.error
    assert second.t_first_answer_ns is not None and second.tool_calls is None
