"""Multi-turn sessions: the client side of an agent conversation, one request per turn.

The caller (the Locust user) drives a session:

    req = session.next_request(None, True)          # first turn
    while req is not None:
        reply, ok = send(req)                         # stream it; reply = the generated text
        wait(session.think_time_s())
        req = session.next_request(reply, ok)

Each turn appends the server's reply to the history verbatim, then (when the turn made a tool
call) the tool call and a tool result, else a fresh user message. History beyond the context
cap either ends the session or drops the oldest turns (the system prompt is always kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loadkit.types import GenerationRequest
from loadkit.workload.spec import SessionSpec
from loadkit.workload.text import TextBuilder

RUNNING, COMPLETED, BROKEN = "running", "completed", "broken"
# A broken session's reason when the code driving it raised (a locustfile's task, or loadkit's
# own scenario task), as opposed to a failed turn's outcome or ``cancelled`` (the run stopped it).
TASK_ERROR = "task_error"
_USER, _TOOL_CALL, _TOOL_RESULT = 1, 2, 3  # text-stream keys inside a session


@dataclass(slots=True)
class _Msg:
    message: dict[str, Any]
    tokens: int
    turn_start: bool = False  # a user message: where truncation may cut


@dataclass(slots=True)
class SessionContext:
    """What a session needs from its source: text, seed, request shape."""

    builder: TextBuilder
    seed: int
    shape: str = "messages"  # PromptSpec.shape
    exact_output: bool = True
    # Told about every request a session makes: (input tokens, max_tokens), for realised().
    on_request: Callable[[int, int], None] | None = None
    text_seed: int | None = None  # the run's salted seed for prompt words (source.py); None: seed

    @property
    def words_seed(self) -> int:
        return self.seed if self.text_seed is None else self.text_seed


class Session:
    """One synthetic multi-turn session; deterministic from (seed, session index)."""

    def __init__(
        self,
        session_id: str,
        index: int,
        spec: SessionSpec,
        ctx: SessionContext,
        system: tuple[str, int, bool] | None = None,
        priority: int | None = None,
    ) -> None:
        self.session_id = session_id
        self.priority = priority  # the tenant's, on every turn (placed per target: loadkit/core/priority.py)
        self.index = index
        self.spec = spec
        self.ctx = ctx
        self.rng = np.random.default_rng([ctx.seed & 0xFFFFFFFF, 0x5E55, index])
        self.turns_planned = spec.turns.sample_int(self.rng)
        self.turns_sent = 0
        self.status = RUNNING
        self.broken_reason: str | None = None
        self.end_reason: str | None = None
        self.history: list[_Msg] = []
        self._system_cached = bool(system and system[2])
        if system is not None:
            self.history.append(_Msg({"role": "system", "content": system[0]}, system[1]))
        self._tool_pending = False
        self._truncated = False
        self._last_prompt_tokens = 0
        self._last_reply_tokens = 0

    def next_request(
        self,
        reply_text: str | None,
        ok: bool,
        reason: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
    ) -> GenerationRequest | None:
        """The next turn's request, or None when the session is over (completed or broken).
        ``tool_calls``: the calls the server streamed in its reply (tool format "server")."""
        if self.status != RUNNING:
            return None
        if not ok:
            self.status, self.broken_reason = BROKEN, reason or f"turn {self.turns_sent} failed"
            return None
        if self.turns_sent > 0 and self._server_tools():
            self._tool_pending = bool(tool_calls)
            self._append_server_reply(reply_text or "", tool_calls or [])
        elif self.turns_sent > 0:
            self._append_reply(reply_text or "")
        if self.turns_sent >= self.turns_planned:
            self.status, self.end_reason = COMPLETED, "turns_done"
            return None
        if not self._tool_pending:
            self._append(_USER, "user", self.spec.user_tokens.sample_int(self.rng), turn_start=True)
        max_tokens = self.spec.output_tokens.sample_int(self.rng)
        if not self._fit_context(max_tokens):
            self.status, self.end_reason = COMPLETED, "context_cap"
            return None
        return self._make_request(max_tokens)

    def think_time_s(self) -> float:
        """Seconds to wait before the next turn: tool latency after a tool call, else think time."""
        if self._tool_pending and self.spec.tool is not None:
            return self.spec.tool.latency_s.sample(self.rng)
        return self.spec.think_time_s.sample(self.rng)

    def _append(
        self,
        stream: int,
        role: str,
        n_tokens: int,
        *,
        turn_start: bool = False,
        prefix: str = "",
        suffix: str = "",
    ) -> None:
        key = (0x5E55, self.index, self.turns_sent, stream)
        body = self.ctx.builder.text(self.ctx.words_seed, key, n_tokens)
        self.history.append(_Msg({"role": role, "content": prefix + body + suffix}, n_tokens, turn_start))

    def _append_reply(self, reply: str) -> None:
        self._last_reply_tokens = self.ctx.builder.count(reply)
        self.history.append(_Msg({"role": "assistant", "content": reply}, self._last_reply_tokens))
        if self._tool_pending:
            self._append_tool_exchange()

    def _server_tools(self) -> bool:
        return self.spec.tool is not None and self.spec.tool.format == "server"

    def _append_server_reply(self, reply: str, calls: list[dict[str, Any]]) -> None:
        """The reply as the protocol expects it back: an assistant message with its
        ``tool_calls`` (the server's ids), then one ``role: "tool"`` result per call."""
        self._last_reply_tokens = self.ctx.builder.count(reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply or None}
        if calls:
            message["tool_calls"] = [
                tool_call_message(i, self.index, self.turns_sent, c) for i, c in enumerate(calls)
            ]
        self.history.append(_Msg(message, self._last_reply_tokens))
        tool = self.spec.tool
        assert tool is not None
        for i, call in enumerate(message.get("tool_calls", [])):
            self._append(_TOOL_RESULT + 16 * i, "tool", tool.result_tokens.sample_int(self.rng))
            self.history[-1].message["tool_call_id"] = call["id"]

    def _append_tool_exchange(self) -> None:
        """The reply's tool call, then the tool's result (OpenAI tool_calls, or tagged text)."""
        tool = self.spec.tool
        assert tool is not None
        n_call, n_result = tool.call_tokens.sample_int(self.rng), tool.result_tokens.sample_int(self.rng)
        key = (0x5E55, self.index, self.turns_sent, _TOOL_CALL)
        args = self.ctx.builder.text(self.ctx.words_seed, key, n_call)
        reply = self.history[-1]
        if tool.format == "openai" and self.ctx.shape == "messages":
            call_id = f"call_{self.index}_{self.turns_sent}"
            reply.message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": args}}
            ]
            reply.tokens += n_call
            self._append(_TOOL_RESULT, "tool", n_result)
            self.history[-1].message["tool_call_id"] = call_id
        else:
            reply.message["content"] += f"\n<tool_call>{args}</tool_call>"
            reply.tokens += n_call
            self._append(_TOOL_RESULT, "user", n_result, prefix="<tool_result>", suffix="</tool_result>")

    def _fit_context(self, max_tokens: int) -> bool:
        cap = self.spec.context_max_tokens
        if cap is None:
            return True
        while self._history_tokens() + max_tokens > cap:
            if self.spec.context_policy == "stop" or not self._drop_oldest_turn():
                return False
        return True

    def _drop_oldest_turn(self) -> bool:
        """Drop from the first non-system message up to the next turn start; keep the current turn."""
        first = 1 if self.history and self.history[0].message["role"] == "system" else 0
        starts = [i for i in range(first + 1, len(self.history)) if self.history[i].turn_start]
        if not starts:
            return False
        del self.history[first : starts[0]]
        self._truncated = True
        return True

    def _history_tokens(self) -> int:
        return sum(m.tokens for m in self.history)

    def _make_request(self, max_tokens: int) -> GenerationRequest:
        n_in = self._history_tokens()
        messages = [dict(m.message) for m in self.history]
        label_key = "first" if self.turns_sent == 0 else "tool" if self._tool_pending else "next"
        req = GenerationRequest(
            messages=messages,
            max_tokens=max_tokens,
            exact_output=self.ctx.exact_output,
            label=self.spec.labels[label_key],
            n_in_target=n_in,
            session_id=self.session_id,
            turn=self.turns_sent + 1,
            expected_cached_tokens=self._expected_cached(),
            priority=self.priority,
        )
        if self.ctx.shape == "prompt":
            req.prompt, req.messages = req.as_prompt(), None
        tool = self.spec.tool
        remaining = self.turns_planned - self.turns_sent - 1
        if tool is not None and tool.format == "server":
            req.extra_body["tools"] = tool.definitions
            req.extra_body["tool_choice"] = tool.tool_choice
        else:
            self._tool_pending = bool(tool and remaining > 0 and self.rng.random() < tool.probability)
        self._last_prompt_tokens = n_in
        self._truncated = False
        self.turns_sent += 1
        if self.ctx.on_request is not None:
            self.ctx.on_request(n_in, max_tokens)
        return req

    def _expected_cached(self) -> int:
        """Content tokens a prefix cache should already hold (templates not counted)."""
        system = self.history[0].tokens if self.history and self.history[0].message["role"] == "system" else 0
        if self.turns_sent == 0 or self._truncated:
            return system if (self._system_cached or self.turns_sent > 0) else 0
        return self._last_prompt_tokens + self._last_reply_tokens


class TraceSession:
    """A Mooncake session: requests whose hash-id prefixes chain, replayed with the trace's prompts.

    The trace fixes every turn's prompt (its blocks already stand for the earlier replies), so
    the server's reply is not spliced in; think time is the trace's gap between the turns'
    arrivals (scaled by speed), not counting how long the reply took.
    """

    def __init__(
        self, session_id: str, make_request: Callable[[int], GenerationRequest], gaps_s: list[float]
    ) -> None:
        self.session_id = session_id
        self._make = make_request
        self._gaps = gaps_s
        self.turns_planned = len(gaps_s) + 1
        self.turns_sent = 0
        self.status = RUNNING
        self.broken_reason: str | None = None
        self.end_reason: str | None = None

    def next_request(
        self,
        reply_text: str | None,
        ok: bool,
        reason: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
    ) -> GenerationRequest | None:
        if self.status != RUNNING:
            return None
        if not ok:
            self.status, self.broken_reason = BROKEN, reason or f"turn {self.turns_sent} failed"
            return None
        if self.turns_sent >= self.turns_planned:
            self.status, self.end_reason = COMPLETED, "turns_done"
            return None
        req = self._make(self.turns_sent)
        self.turns_sent += 1
        return req

    def think_time_s(self) -> float:
        i = self.turns_sent - 1
        return self._gaps[i] if 0 <= i < len(self._gaps) else 0.0


def tool_call_message(i: int, session: int, turn: int, call: dict[str, Any]) -> dict[str, Any]:
    """One streamed call as an assistant message's ``tool_calls`` entry; a server that sent no
    id (Ollama) gets one made up, so the tool result can name it."""
    call_id = call.get("id") or f"call_{session}_{turn}_{i}"
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.get("name") or "", "arguments": call.get("arguments") or ""},
    }
