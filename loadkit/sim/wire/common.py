"""What every wire protocol shares: the parsed request, the outcome, and the format interface.

A format turns one request's stream into bytes: ``start`` (sent with the first token, e.g. the
role chunk), ``token`` (one token-bearing event), ``end`` (finish event, usage, end marker),
``error`` (an in-band error event), ``malformed`` (an event no parser accepts) and ``body``
(the whole non-streamed answer). HTTP framing (chunked encoding) is the server's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from loadkit.sim.textgen import OutputCorpus


class WireError(Exception):
    """A request the engine refuses: status code and the engine's own error body."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        super().__init__(body.decode("utf-8", "replace"))
        self.status = status
        self.body = body
        self.headers = headers or {}


@dataclass(slots=True)
class RequestSpec:
    """An engine-neutral generation request, as the protocol parser understood it."""

    prompt: str
    max_tokens: int
    stream: bool
    model: str
    exact: bool = False  # ignore_eos, or min_tokens >= max_tokens
    min_tokens: int = 0
    include_usage: bool = False
    prompt_ids: list[int] | None = None  # when the client sent token ids
    cache_prompt: bool = True
    continuous_usage: bool = False  # vLLM's stream_options.continuous_usage_stats
    priority: int = 0  # vLLM's `priority` (used with scheduling_policy "priority"; lower first)
    tool_name: str | None = None  # the request carried `tools`: the answer calls the first one
    image_ids: list[int] | None = None  # the prompt tokens of its images (sim/images.py)
    # A request answered in one body (loadkit.core.kinds): "embeddings", "rerank", or a plugin's.
    # item_tokens: each item's tokens (an input; a query + document pair), prompt_ids their sum.
    kind: str = "chat"
    item_tokens: list[int] | None = None
    top_n: int | None = None
    embedding_dim: int = 64  # set from the profile by the server
    image_count: int = 0  # how many images (the truth log's image_count)


@dataclass(slots=True)
class Outcome:
    """What happened to a request, for final events and non-streamed bodies."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    finish_reason: str  # "length" or "stop"
    image_tokens: int = 0  # of prompt_tokens, the images' (sim/images.py)
    # The server's own stage times (ms): arrival → admission, admission → first token written,
    # first → last token written (loadkit.sim.stream.ActiveStream.outcome).
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    queue_ms: float = 0.0
    reasoning_tokens: int = 0


class StreamFormat:
    """Base of every per-request formatter; subclasses set the class attributes."""

    content_type = "text/event-stream; charset=utf-8"
    ndjson = False
    fixed_frame = False  # token() depends on the text only: the sink may build it itself

    def __init__(self, spec: RequestSpec, rid: str, created: int, corpus: OutputCorpus, start: int) -> None:
        self.spec = spec
        self.rid = rid
        self.created = created
        self.corpus = corpus
        self.start_word = start
        self.n_prompt = 0
        self.n_cached = 0

    # The first ``reasoning_tokens`` output tokens are reasoning, sent by ``reasoning_token``:
    # the protocol's own field, or ``<think>`` tags in the text (``reasoning_tags``, a server
    # run without a reasoning parser).
    reasoning_tokens = 0
    reasoning_tags = False

    def reasoning_token(self, text: bytes, index: int, n: int) -> bytes:
        if self.reasoning_tags:
            return self.token(self.tagged(text, index, n), index, n)
        return self.reasoning_chunk(text, index, n)

    def tagged(self, text: bytes, index: int, n: int) -> bytes:
        opening = b"<think>" if index == 0 else b""
        closing = b"</think>" if index + n >= self.reasoning_tokens else b""
        return opening + text + closing

    def reasoning_chunk(self, text: bytes, index: int, n: int) -> bytes:
        """The protocol's reasoning event; protocols without one use the tags."""
        return self.token(self.tagged(text, index, n), index, n)

    def set_prompt(self, prompt_tokens: int, cached: int) -> None:
        self.n_prompt, self.n_cached = prompt_tokens, cached

    def start(self) -> bytes:
        return b""

    def parts(self) -> tuple[bytes, bytes] | None:
        """(before, after) the text when ``token`` is ``before + text + after`` for any index."""
        if not self.fixed_frame or self.spec.tool_name is not None:  # tool-call fragments: no fixed frame
            return None
        before, after = self.token(b"\x00", 0, 1).split(b"\x00")
        return before, after

    def token(self, text: bytes, index: int, n: int) -> bytes:
        raise NotImplementedError

    def last_token(self, text: bytes, index: int, n: int, out: Outcome) -> bytes:
        """The event with the last tokens; most engines send the finish in ``end`` instead."""
        return self.token(text, index, n)

    def end(self, out: Outcome) -> bytes:
        raise NotImplementedError

    def error(self, message: str) -> bytes:
        return sse({"error": {"message": message, "type": "InternalServerError", "code": 500}})

    def malformed(self) -> bytes:
        return b'data: {"choices":[{"index":0,"delta":{"content":"\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        raise NotImplementedError

    def body_headers(self, out: Outcome) -> dict[str, str]:
        """Headers of a non-streamed kind's answer (TEI's counts and stage times)."""
        return {}

    def server_timings(self, out: Outcome) -> dict[str, Any] | None:
        """The per-request timings this protocol reports, as sent (for the truth log)."""
        return None

    def ids(self, index: int, n: int) -> list[int]:
        return self.corpus.ids_of(self.start_word + index, n)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def tool_name(body: dict[str, Any]) -> str | None:
    """The function the simulated model calls: the first of ``tools`` unless ``tool_choice`` is "none"."""
    tools = body.get("tools")
    if not tools or body.get("tool_choice") == "none":
        return None
    first = tools[0] if isinstance(tools, list) else None
    fn = first.get("function") if isinstance(first, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ValueError("tools must be a list of {type: function, function: {name, ...}} objects")
    return str(fn["name"])


def check_tool_messages(messages: Any) -> None:
    """Every ``role: "tool"`` message answers a call of an earlier assistant message by its
    ``tool_call_id``, as the OpenAI API requires (it answers 400 otherwise)."""
    ids: set[str] = set()
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.add(call["id"])
        if m.get("role") == "tool" and m.get("tool_call_id") not in ids:
            raise ValueError(
                "messages with role 'tool' must be a response to a preceding message with "
                f"'tool_calls' (tool_call_id {m.get('tool_call_id')!r} not found)"
            )


def json_str(text: bytes) -> bytes:
    """A JSON string literal of already-safe text (the simulator's words need no escaping)."""
    return b'"' + text + b'"'


def as_int(body: dict[str, Any], key: str, default: int, error: type[Exception] = ValueError) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{key} must be an integer, got {value!r}")
    return value


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; ValueError with a readable reason otherwise."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON body: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("the request body must be a JSON object")
    return obj


def messages_prompt(messages: Any) -> str:
    """Chat messages rendered with a fixed template (the simulator's "chat template")."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError("each message must be an object with a role")
        parts.append(f"<|{m['role']}|>\n{_content_text(m.get('content'))}\n")
    return "".join(parts) + "<|assistant|>\n"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise ValueError("message content must be a string or a list of parts")
