"""A scripted OpenAI-compatible server that is as strict as real ones can be: it lists its
models, refuses unknown models and unknown body fields the way vLLM-style servers do, or fails
every request; and it keeps what it received, for tests to check what reached it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from tests.helpers.scripted_server import END_CHUNK, Script, chunk

CHAT_FIELDS = frozenset({"model", "messages", "max_tokens", "stream", "stream_options"})


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None


def parse_request(raw: bytes) -> Received:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
    return Received(method, path, headers, parsed)


def json_reply(status: int, obj: Any, reason: str = "X") -> Script:
    body = orjson.dumps(obj)
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()  # fmt: skip
    return Script(head=head, writes=[(0, body)])


def chat_stream(tokens: int = 3, gap_s: float = 0.0) -> Script:
    events = [
        {"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]}
        for i in range(tokens)
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": 5 + tokens}})  # fmt: skip
    writes = [(gap_s, chunk(b"data: " + orjson.dumps(e) + b"\n\n")) for e in events]
    writes += [(0.0, chunk(b"data: [DONE]\n\n")), (0.0, END_CHUNK)]
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n")  # fmt: skip
    return Script(head=head, writes=writes)


class StrictOpenAI:
    """``script_for_request`` for ScriptedServer.

    ``allowed``: body fields accepted on POST (None: any); others get vLLM-strict's 422 naming
    them. ``models``: listed at /v1/models; with ``check_model`` another model gets 400.
    ``require``: (header, value) every request must carry, else 401. ``owner``: the models'
    ``owned_by`` (``"vllm"`` is vLLM's fingerprint for --engine auto).
    ``fail_status``: every POST fails at once with this status — from the start, or from
    ``fail_after_s`` after the first POST (a target that dies during the run). ``gap_s``: the
    wait before each stream event.
    """

    def __init__(self, models: tuple[str, ...] = ("served-model",), allowed: frozenset[str] | None = None,
                 check_model: bool = False, fail_status: int | None = None, fail_after_s: float = 0.0,
                 gap_s: float = 0.0, owner: str = "someone", require: tuple[str, str] | None = None) -> None:  # fmt: skip
        self.models, self.allowed, self.check_model, self.fail_status = (
            models,
            allowed,
            check_model,
            fail_status,
        )
        self.fail_after_s, self.gap_s, self.owner, self.require = fail_after_s, gap_s, owner, require
        self.first_post: float | None = None
        self.received: list[Received] = []

    def failing(self) -> bool:
        if self.fail_status is None:
            return False
        if self.first_post is None:
            self.first_post = time.monotonic()
        return time.monotonic() - self.first_post >= self.fail_after_s

    def __call__(self, raw: bytes) -> Script:
        req = parse_request(raw)
        self.received.append(req)
        if self.require is not None and req.headers.get(self.require[0]) != self.require[1]:
            return json_reply(401, {"error": {"message": "missing or wrong credentials"}})
        if req.method == "GET" and req.path == "/v1/models":
            models = [{"id": m, "object": "model", "owned_by": self.owner} for m in self.models]
            return json_reply(200, {"object": "list", "data": models})
        if req.method != "POST":
            return json_reply(404, {"detail": "Not Found"})
        if self.failing():
            return json_reply(
                self.fail_status, {"error": {"message": "the engine is broken", "code": self.fail_status}}
            )
        body = req.body if isinstance(req.body, dict) else {}
        unknown = set(body) - self.allowed if self.allowed is not None else set()
        if unknown:
            return json_reply(422, {"detail": f"Unexpected fields in the request: {unknown!r}"})
        if self.check_model and body.get("model") not in self.models:
            return json_reply(400, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                              "type": "NotFoundError", "code": 404}})  # fmt: skip
        return chat_stream(gap_s=self.gap_s)

    def posts(self) -> list[Received]:
        return [r for r in self.received if r.method == "POST"]
