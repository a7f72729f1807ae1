"""OpenAI-compatible servers the way real ones differ, as scripts for ScriptedServer.

Each answers a POST with a stream of ``max_tokens`` one-token chunks (the request's own
``max_tokens``) and ends it its own way; ``GET /v1/models`` lists one model (what
``--engine auto`` and server-info probes see); any other GET is a 404.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import count

from tests.helpers.scripted_server import END_CHUNK, Script, chunk

HEAD_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
MODEL = "variant-model"
IN_BAND_MESSAGE = "KV cache exhausted: request preempted by the scheduler"
STRICT_DETAIL = {"detail": "Unexpected fields in the request: {'min_tokens', 'ignore_eos'}"}


def sse(obj: object) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return chunk(f"data: {data}\n\n".encode())


def delta(i: int) -> bytes:
    return sse({"object": "chat.completion.chunk", "model": MODEL,
                "choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]})  # fmt: skip


def finish(n: int, usage: bool = True) -> bytes:
    body: dict[str, object] = {"object": "chat.completion.chunk", "model": MODEL,
                               "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}  # fmt: skip
    if usage:
        body["usage"] = {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n}
    return sse(body)


def json_response(status: str, obj: object) -> Script:
    body = json.dumps(obj).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    return Script(head=head, writes=[(0, body)], close=False)


def max_tokens(request: bytes) -> int:
    try:
        return int(json.loads(request.partition(b"\r\n\r\n")[2])["max_tokens"])
    except (ValueError, KeyError, TypeError):
        return 4


def tokens(n: int, first_s: float, gap_s: float) -> list[tuple[float, bytes]]:
    return [(first_s if i == 0 else gap_s, delta(i)) for i in range(n)]


def no_done(first_s: float = 0.005, gap_s: float = 0.002) -> Callable[[int], list[tuple[float, bytes]]]:
    """Finish chunk with finish_reason and usage, then the body's end: no ``[DONE]``."""
    return lambda n: [*tokens(n, first_s, gap_s), (0, finish(n)), (0, END_CHUNK)]


def no_done_no_finish(n: int) -> list[tuple[float, bytes]]:
    """Tokens, then the body's clean end: neither ``[DONE]`` nor a finish_reason."""
    return [*tokens(n, 0.005, 0.002), (0, END_CHUNK)]


def with_done(n: int) -> list[tuple[float, bytes]]:
    return [*tokens(n, 0.005, 0.002), (0, finish(n)), (0, sse("[DONE]")), (0, END_CHUNK)]


def in_band_error(n: int) -> list[tuple[float, bytes]]:
    """Two tokens, then an ``{"error": ...}`` event inside the 200 stream."""
    error = {"error": {"message": IN_BAND_MESSAGE, "type": "server_error", "code": 503}}
    return [*tokens(min(n, 2), 0.005, 0.002), (0, sse(error)), (0, END_CHUNK)]


def server(stream: Callable[[int], list[tuple[float, bytes]]], *, every: int = 0,
           other: Callable[[int], list[tuple[float, bytes]]] | None = None,
           strict: bool = False, strict_from: int = 0) -> Callable[[bytes], Script]:  # fmt: skip
    """A script_for_request: ``stream`` for every POST (``other`` for every ``every``-th one);
    ``strict``: answer every POST from the ``strict_from``-th on (0: all) 422 naming the fields
    loadkit added, as a strict server does (``strict_from=1`` lets pre-flight's request through,
    so the refusals reach the run itself)."""
    posts = count()

    def script_for(request: bytes) -> Script:
        line = request.split(b"\r\n", 1)[0]
        if line.startswith(b"GET /v1/models "):
            return json_response("200 OK", {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if line.startswith(b"GET "):
            return json_response("404 Not Found", {"detail": "Not Found"})
        i = next(posts)
        if strict and i >= strict_from:
            return json_response("422 Unprocessable Entity", STRICT_DETAIL)
        make = other if (other is not None and every and i % every == every - 1) else stream
        return Script(head=HEAD_SSE, writes=make(max_tokens(request)), close=False)

    return script_for
