"""Conversation: a multi-turn session that a Locust task drives itself, turn by turn.

    with self.session(name="agent", system="You are a tool-using agent.") as conv:
        rec = conv.chat("What is the weather in Paris?", max_tokens=64)
        while rec.ok and wants_tool(rec.text):
            conv.add("user", run_tool(rec.text))     # any message: a tool result, a correction
            rec = conv.chat(max_tokens=64)            # send the history as it stands

Each ``chat`` sends the whole history (the system prompt, every message, every reply) as one
streamed request with the session's id, so ``--session-header`` routes it and the session and
turn stats count it like a scenario session; the reply is appended verbatim when the turn is
ok. A failed turn appends nothing: the task may send the same history again or give up.
Turns are labelled ``turn1`` and ``turnN`` (prefixed with the session's name, when given), so
the cold first turn and the warm later turns are reported apart; a later turn expects the last
prompt and reply (as the server counted them) to be cached.

When the conversation closes (the ``with`` block ends, or ``close()``) it is counted once:
completed, or broken by its first failed turn's outcome, at that turn. A block left by an
exception breaks it at the turn it did not finish (the next one, when every turn sent had
ended): ``cancelled`` when the run stopped the task (the exceptions in ``stops``: Locust's
StopUser, GreenletExit ...), ``task_error`` when the task itself raised (the exception is
counted in the report's ``task_errors`` too). Nothing here imports Locust.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Unpack

from loadkit.records import RequestRecord
from loadkit.requestargs import BodyFields, body_fields, check_common, text_argument
from loadkit.types import CANCELLED, GenerationRequest
from loadkit.workload.sessions import BROKEN, COMPLETED, RUNNING, TASK_ERROR, tool_call_message

Send = Callable[[GenerationRequest], RequestRecord]
CHAT_KEYWORDS = ("role", "max_tokens", "label", "exact_output")


class Conversation:
    """A multi-turn session a task drives turn by turn, as ``self.session()`` returns it: the
    history (system prompt, messages, replies verbatim), one session id, turn labels
    (``turn1`` / ``turnN``), counted once when it closes (the module docstring has the rules).
    ``send`` streams one request; ``ended`` is told once, at close."""

    def __init__(self, send: Send, ended: Callable[[Conversation], None], session_id: str,
                 name: str | None = None, system: str | None = None,
                 stops: tuple[type[BaseException], ...] = ()) -> None:  # fmt: skip
        self.session_id = session_id
        self.name = name
        self.history: list[dict[str, Any]] = []
        self.turns_sent = 0
        self.turns_ended = 0  # turns whose record came back
        self.status = RUNNING
        # The first failed turn's outcome, or cancelled / task_error for a block left by an exception.
        self.broken_reason: str | None = None
        self.broken_at_turn: int | None = None  # the turn it did not get past
        self._stops = stops
        self.end_reason: str | None = None
        self.last: RequestRecord | None = None
        self._send, self._ended = send, ended
        if system is not None:
            self.add("system", system)

    def add(self, role: str, content: str, **fields: Any) -> None:
        """Append one message (e.g. ``add("tool", result, tool_call_id=...)``) without sending."""
        self.history.append({"role": role, "content": content, **fields})

    def chat(self, content: str | None = None, *, role: str = "user", max_tokens: int = 128,
             label: str | None = None, exact_output: bool = True, extra_body: dict[str, Any] | None = None,
             **fields: Unpack[BodyFields]) -> RequestRecord:  # fmt: skip
        """Append ``content`` (as ``role``) when given, send the history, return the turn's record.

        :param content: the next message's text (a str), or None to send the history as it
            stands (e.g. after ``answer_tools`` or ``add``).
        :param role: the role of ``content``'s message.
        :param max_tokens: the output tokens asked for (an int >= 1).
        :param label: the stats' label (default ``turn1`` / ``turnN``, prefixed with the name).
        :param exact_output: ask the engine for exactly ``max_tokens`` where it can.
        :param extra_body: further request-body fields, merged in as given.
        :param fields: the standard body fields (``BodyFields``:
            ``temperature``, ``tools``, ...); any other keyword is refused."""
        if self.status != RUNNING:
            raise RuntimeError(f"conversation {self.session_id} is closed")
        call = "conv.chat"
        text_argument(call, "content", content, optional=True, hint="add messages one by one with conv.add")
        text_argument(call, "role", role)
        check_common(call, max_tokens, label, exact_output)
        body = body_fields(call, CHAT_KEYWORDS, fields, extra_body)
        if content is not None:
            self.add(role, content)
        request = GenerationRequest(messages=[dict(m) for m in self.history], max_tokens=max_tokens,
                                    exact_output=exact_output, label=label or self._turn_label(),
                                    session_id=self.session_id, turn=self.turns_sent + 1,
                                    expected_cached_tokens=self._expected_cached(),
                                    extra_body=body)  # fmt: skip
        self.turns_sent += 1
        record = self._send(request)
        self.turns_ended += 1
        self.last = record
        if record.ok:
            self.history.append(self._reply_message(record))
        elif self.broken_reason is None:
            self.broken_reason, self.broken_at_turn = record.outcome, self.turns_sent
        return record

    def _reply_message(self, record: RequestRecord) -> dict[str, Any]:
        """The reply as the protocol wants it back: with the calls the server streamed, if any."""
        if not record.tool_calls:
            return {"role": "assistant", "content": record.text}
        calls = [tool_call_message(i, 0, self.turns_sent, c) for i, c in enumerate(record.tool_calls)]
        return {"role": "assistant", "content": record.text or None, "tool_calls": calls}

    def answer_tools(self, *results: str) -> None:
        """Answer every tool call of the last reply, in order: one ``role: "tool"`` message per
        call with its ``tool_call_id`` (then ``chat()`` with no content sends them).

        :param results: one str per tool call of the last reply (``conv.last.tool_calls``),
            in the calls' order: ``conv.answer_tools(weather, time)`` for two calls.
        :raises ValueError: the last reply made no tool call, or a different number of them.
        :raises UserAPIError: a result is not a str."""
        calls = self.history[-1].get("tool_calls") if self.history else None
        if not calls or len(results) != len(calls):
            raise ValueError(
                f"the last reply made {len(calls or [])} tool call(s); got {len(results)} result(s)"
            )
        for i, result in enumerate(results):
            text_argument("conv.answer_tools", f"results[{i}]", result)
        for call, result in zip(calls, results, strict=True):
            self.add("tool", result, tool_call_id=call["id"])

    def _expected_cached(self) -> int | None:
        """The prefix a cache should hold: the last prompt and its reply, as the server counted
        them, when the last turn succeeded; else unknown."""
        last = self.last
        if last is None or not last.ok or last.n_in is None or last.n_out is None:
            return None
        return last.n_in + last.n_out

    def _turn_label(self) -> str:
        turn = "turn1" if self.turns_sent == 0 else "turnN"
        return f"{self.name}:{turn}" if self.name else turn

    def close(self, reason: str = "done") -> None:
        """End the conversation and count it (once; later calls do nothing)."""
        if self.status != RUNNING:
            return
        if self.broken_reason is not None:
            self.status = BROKEN
        else:
            self.status, self.end_reason = COMPLETED, reason
        if self.turns_sent:
            self._ended(self)

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        if exc is not None and self.broken_reason is None and self.status == RUNNING:
            self.broken_reason = break_reason(exc, self._stops)
            # Every turn sent had ended: the task raised (or was stopped) on its way to the next.
            self.broken_at_turn = self.turns_ended + 1
        self.close()


def break_reason(exc: BaseException, stops: tuple[type[BaseException], ...]) -> str:
    """Why a session left by ``exc`` broke: ``cancelled`` when the run stopped the task (an
    exception of ``stops``, or one that is not an ``Exception``: GreenletExit,
    KeyboardInterrupt), else ``task_error`` (the task's own code raised)."""
    if isinstance(exc, stops) or not isinstance(exc, Exception):
        return CANCELLED
    return TASK_ERROR
