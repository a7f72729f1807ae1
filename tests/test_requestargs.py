"""What the user API's calls accept (loadkit/requestargs.py): LLMUser.chat / complete and
Conversation.chat build the request asked for, or refuse with an error naming the argument."""

from __future__ import annotations

import pytest

from loadkit.conversation import Conversation
from loadkit.locust.api import LLMCalls
from loadkit.records import RequestRecord
from loadkit.requestargs import BODY_KEYWORDS, UserAPIError
from loadkit.types import GenerationRequest


class Calls(LLMCalls):
    """The call half of LLMUser with a send that keeps the request (no Locust: abstract)."""

    abstract = True

    def __init__(self) -> None:
        self.sent: list[GenerationRequest] = []

    def send(self, request: GenerationRequest, budgeted: bool = False) -> RequestRecord:
        self.sent.append(request)
        return RequestRecord(
            f"r{len(self.sent)}", "e", "openai", label=request.label, outcome="ok", text="yes"
        )


def test_what_an_experienced_user_passes_is_sent_as_meant():
    calls = Calls()
    calls.chat("hi")
    calls.chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], max_tokens=8)
    calls.chat({"role": "user", "content": f"q{i}"} for i in range(2))  # any iterable of dicts
    calls.chat("hi", temperature=0, tools=[{"type": "function"}], extra_body={"top_k": 20, "model": "other"})
    calls.complete("Once upon a time", max_tokens=5, stop=["\n"], label="story")
    one, two, three, four, five = calls.sent
    assert (
        one.messages == [{"role": "user", "content": "hi"}] and one.extra_body == {} and one.max_tokens == 128
    )
    assert two.messages[0] == {"role": "system", "content": "be brief"} and two.max_tokens == 8
    assert [m["content"] for m in three.messages or []] == ["q0", "q1"]
    assert four.extra_body == {
        "temperature": 0,
        "tools": [{"type": "function"}],
        "top_k": 20,
        "model": "other",
    }
    assert (five.prompt, five.max_tokens, five.label, five.extra_body) == ("Once upon a time", 5, "story",
                                                                           {"stop": ["\n"]})  # fmt: skip


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (
            lambda c: c.chat({"role": "user", "content": "hi"}),
            "chat(messages=...): expected a list of message dicts or a str, got one dict {'role': 'user', "
            "'content': 'hi'}: wrap it in a list, [{...}]",
        ),
        (
            lambda c: c.chat(["hello", "there"]),
            "chat(messages=...): messages[0] is a str ('hello'); expected message dicts",
        ),
        (
            lambda c: c.chat([{"content": "no role"}]),
            "chat(messages=...): messages[0]: expected a dict with a str 'role'",
        ),
        (lambda c: c.chat([]), "chat(messages=...): expected at least one message, got an empty list"),
        (
            lambda c: c.chat(b"hi"),
            "chat(messages=...): expected a list of message dicts or a str, got bytes b'hi'",
        ),
        (lambda c: c.chat(42), "chat(messages=...): expected a list of message dicts or a str, got int 42"),
        (
            lambda c: c.chat("hi", max_token=8),
            "chat() got an unexpected keyword argument 'max_token' (did you mean 'max_tokens'?); it accepts max_tokens, "
            "label, exact_output, "
            + ", ".join(BODY_KEYWORDS)
            + ", extra_body. Pass other request-body fields as "
            "extra_body={'max_token': ...}",
        ),
        (lambda c: c.chat("hi", top_k=20), "chat() got an unexpected keyword argument 'top_k'"),
        (lambda c: c.chat("hi", max_tokens="8"), "chat(max_tokens=...): expected an int >= 1, got '8'"),
        (lambda c: c.chat("hi", max_tokens=0), "chat(max_tokens=...): expected an int >= 1, got 0"),
        (lambda c: c.chat("hi", label=""), "chat(label=...): expected a non-empty str, got ''"),
        (
            lambda c: c.chat("hi", exact_output="no"),
            "chat(exact_output=...): expected True or False, got 'no'",
        ),
        (
            lambda c: c.chat("hi", extra_body=[("top_k", 1)]),
            "chat(extra_body=...): expected a dict of request-body fields, got list",
        ),
        (
            lambda c: c.chat("hi", temperature=0, extra_body={"temperature": 1}),
            "chat(): 'temperature' given both as a keyword and in extra_body; give it once",
        ),
        (
            lambda c: c.chat("hi", extra_body={"max_tokens": 5}),
            "chat(extra_body=...): 'max_tokens' is written by loadkit (use max_tokens=)",
        ),
        (
            lambda c: c.chat("hi", extra_body={"stream": False}),
            "chat(extra_body=...): 'stream' is written by loadkit (loadkit always streams)",
        ),
        (
            lambda c: c.complete([{"role": "user", "content": "hi"}]),
            "complete(prompt=...): expected a str, got list [{'role': 'user', 'content': 'hi'}] (chat messages go to "
            "self.chat)",
        ),
        (
            lambda c: c.complete("hi", temprature=0),
            "complete() got an unexpected keyword argument 'temprature' (did you mean 'temperature'?)",
        ),
    ],
)
def test_a_call_that_cannot_mean_what_it_says_is_refused_naming_the_argument(call, says):
    calls = Calls()
    with pytest.raises(UserAPIError) as info:
        call(calls)
    assert str(info.value).startswith(says), str(info.value)
    assert isinstance(info.value, TypeError) and not calls.sent  # nothing half-sent


def test_a_conversation_turn_checks_its_arguments_the_same_way():
    calls = Calls()
    conv = Conversation(calls.send, lambda c: None, "S-1")
    with pytest.raises(
        UserAPIError,
        match=r"conv\.chat\(\) got an unexpected keyword argument 'max_token' \(did you "
        r"mean 'max_tokens'\?\); it accepts role, max_tokens, label, exact_output",
    ):
        conv.chat("hi", max_token=8)
    with pytest.raises(
        UserAPIError,
        match=r"conv\.chat\(content=\.\.\.\): expected a str or None, got list .* "
        r"\(add messages one by one with conv\.add\)",
    ):
        conv.chat([{"role": "user", "content": "hi"}])
    assert conv.history == [] and not calls.sent  # a refused turn appends nothing
    conv.chat("hi", seed=7, extra_body={"top_k": 2})
    assert calls.sent[0].extra_body == {"seed": 7, "top_k": 2} and len(conv.history) == 2
    conv.history[-1]["tool_calls"] = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    with pytest.raises(
        UserAPIError, match=r"conv\.answer_tools\(results\[0\]=\.\.\.\): expected a str, got dict"
    ):
        conv.answer_tools({"temperature": 20})
    conv.answer_tools("20 C")
    assert conv.history[-1] == {"role": "tool", "content": "20 C", "tool_call_id": "c1"}
