"""OpenAI-style stream events as chunked HTTP writes, for scripting a ScriptedServer: the pieces
the client tests (timer, TLS, adapter errors) build their streams from."""

from __future__ import annotations

from typing import Any

import orjson

from loadkit import types as t
from tests.helpers.scripted_server import chunk


def sse(obj: Any) -> bytes:
    data = obj if isinstance(obj, str) else orjson.dumps(obj).decode()
    return chunk(f"data: {data}\n\n".encode())


def delta(text: str) -> bytes:
    return sse({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


ROLE = sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
USAGE = sse(
    {
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 3}},
    }
)
DONE = sse("[DONE]")
REQ = t.GenerationRequest(prompt="hello", max_tokens=5)
