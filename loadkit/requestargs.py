"""What the user API's request calls accept: ``LLMUser.chat`` / ``complete`` and ``Conversation.chat``.

A call that cannot mean what it says is refused before anything is sent, with a
``UserAPIError`` naming the argument and what was given: a single message dict where a
list is expected, a list of strings, a keyword nobody defines. Keywords are checked because a
typo (``max_token=8``) used to go into the request body unseen and the run measured 128-token
replies; the standard OpenAI sampling and tool fields (``BodyFields``) are keywords, and
anything else a server takes goes in ``extra_body={...}``, said as such. The checks run once
per request, at the call, never per stream event. Nothing here imports Locust.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, TypedDict

from loadkit.errors import UserError


class UserAPIError(TypeError, UserError):
    """A user-API call given something it cannot send; the message names the argument."""


class BodyFields(TypedDict, total=False):
    """Request-body fields the calls take as keywords (the OpenAI chat / completions names),
    sent as given. Anything else goes in ``extra_body``."""

    temperature: float
    top_p: float
    stop: str | list[str]
    seed: int
    presence_penalty: float
    frequency_penalty: float
    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any]
    response_format: dict[str, Any]


BODY_KEYWORDS: tuple[str, ...] = tuple(BodyFields.__annotations__)
# Fields loadkit writes and records itself: set through their own arguments, so the record
# says what was asked (an extra_body max_tokens would be sent but not measured against).
OWNED_FIELDS = {"max_tokens": "max_tokens=", "stream": None, "messages": "the messages argument",
                "prompt": "the prompt argument"}  # fmt: skip


def _shown(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def body_fields(call: str, named: tuple[str, ...], fields: Mapping[str, Any],
                extra_body: Mapping[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The request's extra body: ``fields`` (keywords of ``call`` beyond its ``named`` ones)
    checked against BodyFields, then ``extra_body`` merged in; UserAPIError otherwise."""
    unknown = [k for k in fields if k not in BODY_KEYWORDS]
    if unknown:
        accepted = (*named, *BODY_KEYWORDS, "extra_body")
        close = difflib.get_close_matches(unknown[0], accepted, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserAPIError(
            f"{call}() got an unexpected keyword argument {unknown[0]!r}{hint}; it accepts {', '.join(accepted)}. "
            f"Pass other request-body fields as extra_body={{{unknown[0]!r}: ...}}"
        )
    body = dict(fields)
    if extra_body is None:
        return body
    if not isinstance(extra_body, Mapping):
        raise UserAPIError(f"{call}(extra_body=...): expected a dict of request-body fields, got "
                           f"{type(extra_body).__name__} {_shown(extra_body)}")  # fmt: skip
    for key in extra_body:
        if key in body:
            raise UserAPIError(f"{call}(): {key!r} given both as a keyword and in extra_body; give it once")
        if key in OWNED_FIELDS:
            how = OWNED_FIELDS[key]
            instead = f"use {how}" if how else "loadkit always streams"
            raise UserAPIError(f"{call}(extra_body=...): {key!r} is written by loadkit ({instead})")
    body.update(extra_body)
    return body


def check_common(call: str, max_tokens: Any, label: Any, exact_output: Any) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise UserAPIError(f"{call}(max_tokens=...): expected an int >= 1, got {_shown(max_tokens)}")
    if label is not None and (not isinstance(label, str) or not label):
        raise UserAPIError(f"{call}(label=...): expected a non-empty str, got {_shown(label)}")
    if not isinstance(exact_output, bool):
        raise UserAPIError(f"{call}(exact_output=...): expected True or False, got {_shown(exact_output)}")


def chat_messages(call: str, messages: Any) -> list[dict[str, Any]]:
    """``messages`` as a list of message dicts: a str is one user message; a list (or other
    iterable) of dicts with a ``role`` each is copied; anything else is refused."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        raise UserAPIError(f"{call}(messages=...): expected a list of message dicts or a str, got one dict "
                           f"{_shown(dict(messages))}: wrap it in a list, [{{...}}]")  # fmt: skip
    if isinstance(messages, bytes | bytearray) or not hasattr(messages, "__iter__"):
        raise UserAPIError(f"{call}(messages=...): expected a list of message dicts or a str, got "
                           f"{type(messages).__name__} {_shown(messages)}")  # fmt: skip
    listed = list(messages)
    if not listed:
        raise UserAPIError(f"{call}(messages=...): expected at least one message, got an empty list")
    out = []
    for i, message in enumerate(listed):
        if isinstance(message, str):
            raise UserAPIError(
                f"{call}(messages=...): messages[{i}] is a str ({_shown(message, 40)}); expected message dicts "
                f'({{"role": "user", "content": ...}}); pass one str for a single user message'
            )
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise UserAPIError(f"{call}(messages=...): messages[{i}]: expected a dict with a str 'role', got "
                               f"{_shown(message)}")  # fmt: skip
        out.append(dict(message))
    return out


def text_argument(call: str, name: str, value: Any, optional: bool = False, hint: str = "") -> None:
    """A str argument (``prompt``, a turn's ``content``); None too when ``optional``. ``hint``
    follows the error when a list or dict was given (where such a value belongs)."""
    if isinstance(value, str) or (optional and value is None):
        return
    hint = f" ({hint})" if hint and isinstance(value, list | tuple | Mapping) else ""
    raise UserAPIError(f"{call}({name}=...): expected a str{' or None' if optional else ''}, got "
                       f"{type(value).__name__} {_shown(value)}{hint}")  # fmt: skip
