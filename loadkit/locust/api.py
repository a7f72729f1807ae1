"""What a task of your own LLMUser calls: ``chat``, ``complete``, ``session``.

Each call builds one GenerationRequest and sends it through ``LLMUser.send``, the path the
scenario traffic takes: the stream timer stamps it, the request counts against
--max-requests and in the conservation check, and its record reaches the stats, the SLOs,
the raw log, the reports and the web UI. The record comes back, so the task can branch on
the reply (``rec.ok``, ``rec.text``, ``rec.n_out``, ``rec.outcome``). docs/locustfiles.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Unpack

from loadkit.conversation import Conversation
from loadkit.records import RequestRecord
from loadkit.requestargs import BodyFields, body_fields, chat_messages, check_common, text_argument
from loadkit.types import GenerationRequest

if TYPE_CHECKING:
    from loadkit.locust.runtime import Runtime

Messages = str | Iterable[dict[str, Any]]
CALL_KEYWORDS = ("max_tokens", "label", "exact_output")


def register_listeners(events: Any = None) -> None:
    """Add loadkit's listeners to ``events`` (default ``locust.events``, the one a locustfile's
    run uses); once per Events object. Defining a loadkit user class in a locustfile does it."""
    if events is None:
        from locust import events as locust_events

        events = locust_events
    from loadkit.locust.listeners import register

    register(events)


class LLMCalls:
    """The request-making half of LLMUser (mixed into it; see the module docstring)."""

    runtime: Runtime
    target: Any  # class attribute: a target's name; in a running user, that Target

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A locustfile defining a concrete loadkit user is all the wiring loadkit needs: its
        # listeners join Locust's events while the locustfile is imported, as Locust's own are.
        if not cls.__dict__.get("abstract", False):
            register_listeners()

    def send(self, request: GenerationRequest, budgeted: bool = False) -> RequestRecord:
        raise NotImplementedError  # LLMUser.send

    def _stop_if_halted(self) -> None:
        """Before a call's arguments are checked: a run stopped (by a refused call, the breaker)
        ends the user here, so a bad call repeated by every task loop is reported once."""
        runtime = getattr(self, "runtime", None)
        if runtime is not None and runtime.halted:
            from locust.exception import StopUser

            raise StopUser()

    def chat(self, messages: Messages, *, max_tokens: int = 128, label: str = "chat", exact_output: bool = True,
             extra_body: dict[str, Any] | None = None, **fields: Unpack[BodyFields]) -> RequestRecord:  # fmt: skip
        """Stream one chat request and return its record when the stream ends.

        :param messages: a list of message dicts (``{"role": ..., "content": ...}``), or a str:
            one user message. A single dict or a list of strings is refused (UserAPIError).
        :param max_tokens: the output tokens asked for (an int >= 1).
        :param label: the stats' label of the request.
        :param exact_output: ask the engine for exactly ``max_tokens`` where it can.
        :param extra_body: further request-body fields, merged in as given (engine-specific
            ones: ``{"top_k": 20}``, ``{"chat_template_kwargs": {...}}``).
        :param fields: the standard body fields (``BodyFields``:
            ``temperature``, ``top_p``, ``stop``, ``seed``, ``tools``, ...); any other keyword
            is refused with the accepted ones listed."""
        call = "chat"
        self._stop_if_halted()
        listed = chat_messages(call, messages)
        check_common(call, max_tokens, label, exact_output)
        body = body_fields(call, CALL_KEYWORDS, fields, extra_body)
        request = GenerationRequest(messages=listed, max_tokens=max_tokens, label=label, exact_output=exact_output,
                                    extra_body=body)  # fmt: skip
        return self.send(request)

    def complete(self, prompt: str, *, max_tokens: int = 128, label: str = "completion", exact_output: bool = True,
                 extra_body: dict[str, Any] | None = None, **fields: Unpack[BodyFields]) -> RequestRecord:  # fmt: skip
        """Stream one completion request for ``prompt`` (a str; a chat target gets it as one
        user message) and return its record. Keywords as ``chat``'s."""
        call = "complete"
        self._stop_if_halted()
        text_argument(call, "prompt", prompt, hint="chat messages go to self.chat")
        check_common(call, max_tokens, label, exact_output)
        body = body_fields(call, CALL_KEYWORDS, fields, extra_body)
        request = GenerationRequest(prompt=prompt, max_tokens=max_tokens, label=label, exact_output=exact_output,
                                    extra_body=body)  # fmt: skip
        return self.send(request)

    def session(self, name: str | None = None, *, system: str | None = None) -> Conversation:
        """A multi-turn conversation with its own session id (see loadkit.conversation)."""
        self._stop_if_halted()
        from loadkit.locust.taskerrors import STOPS

        session_id = f"{type(self).__name__}-{uuid.uuid4().hex[:12]}"
        return Conversation(
            self.send, self._conversation_ended, session_id, name=name, system=system, stops=STOPS
        )

    def _conversation_ended(self, conversation: Conversation) -> None:
        sessions = getattr(self.runtime, "sections", None)
        if sessions is not None:
            sessions.add_session(self.target.name, conversation)
