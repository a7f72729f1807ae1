"""The Anthropic Messages API, streamed: ``POST /v1/messages`` with ``stream: true``.

Stream (SSE, named events): ``message_start`` (usage: input, cache-read and cache-creation
tokens), per content block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop``, ``ping`` keep-alives, ``message_delta`` (stop_reason and the final
``usage.output_tokens``), then ``message_stop``, the normal end. An ``error`` event is an
in-band error. Deltas: ``text_delta`` is output text, ``thinking_delta`` is reasoning (it counts
toward the first token), ``input_json_delta`` is tool-call output, ``signature_delta`` carries
no tokens. An event type this adapter does not know is a malformed stream, on purpose: a new
event means the adapter needs a look, and failing loudly beats measuring the wrong thing.

Tokens per event: the API does not say; one per delta (n_out comes exact from usage).
Exact output: the API has no ignore_eos; ``max_tokens`` is an upper bound only.
"""

from __future__ import annotations

from typing import Any

import orjson

from loadkit import (
    EngineAdapter,
    GenerationRequest,
    HttpRequest,
    MalformedEvent,
    StreamParser,
    TokenEvent,
    Usage,
)

API_VERSION = "2023-06-01"
QUIET_EVENTS = frozenset({"ping", "content_block_stop"})
DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sub(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested object, or an empty one when the field is absent or not an object."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def load(data: str) -> dict[str, Any]:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedEvent(f"invalid JSON in Anthropic event: {exc}: {data[:120]!r}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise MalformedEvent(f"Anthropic event without a type: {data[:120]!r}")
    return obj


class MessagesStreamParser(StreamParser):
    """Keeps the prompt-side usage from message_start to report it with the final count."""

    __slots__ = ("prompt_tokens", "cached_tokens")

    def __init__(self) -> None:
        self.prompt_tokens: int | None = None
        self.cached_tokens: int | None = None

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        obj = load(data)
        kind = obj["type"]
        if kind in QUIET_EVENTS:
            return None
        handler = getattr(self, f"on_{kind}", None)
        if handler is None:
            raise MalformedEvent(f"unexpected Anthropic event type {kind!r}")
        result: TokenEvent | None = handler(obj)
        return result

    def on_error(self, obj: dict[str, Any]) -> TokenEvent:
        err = obj.get("error")
        if isinstance(err, dict):
            return TokenEvent(error=f"{err.get('type')}: {err.get('message')}")
        return TokenEvent(error=str(err))

    def on_message_start(self, obj: dict[str, Any]) -> None:
        message = obj.get("message")
        if not isinstance(message, dict):
            raise MalformedEvent("message_start without a message object")
        self.take_input_usage(sub(message, "usage"))

    def take_input_usage(self, usage: dict[str, Any]) -> None:
        parts = [
            _int(usage.get(k))
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        ]
        if parts[0] is None:
            return
        # input_tokens excludes cache reads and writes; the prompt is all three together.
        self.prompt_tokens = sum(p for p in parts if p is not None)
        self.cached_tokens = parts[1]

    def on_content_block_start(self, obj: dict[str, Any]) -> TokenEvent | None:
        block = obj.get("content_block")
        if not isinstance(block, dict):
            raise MalformedEvent("content_block_start without a content_block")
        text, thinking = block.get("text") or "", block.get("thinking") or ""
        return TokenEvent(tokens=1, text=text, reasoning_text=thinking) if (text or thinking) else None

    def on_content_block_delta(self, obj: dict[str, Any]) -> TokenEvent | None:
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            raise MalformedEvent("content_block_delta without a delta")
        kind = delta.get("type")
        if kind == "signature_delta":
            return None
        if kind not in DELTA_FIELDS or not isinstance(delta.get(DELTA_FIELDS[kind]), str):
            raise MalformedEvent(f"unexpected content_block_delta {str(delta)[:120]!r}")
        value = delta[DELTA_FIELDS[kind]]
        if kind == "thinking_delta":
            return TokenEvent(tokens=1, reasoning_text=value)
        return TokenEvent(tokens=1, text=value)

    def on_message_delta(self, obj: dict[str, Any]) -> TokenEvent:
        delta = sub(obj, "delta")
        usage = sub(obj, "usage")
        self.take_input_usage(usage)  # message_delta's counts are cumulative where it sends them
        return TokenEvent(
            usage=Usage(
                prompt_tokens=self.prompt_tokens,
                completion_tokens=_int(usage.get("output_tokens")),
                cached_tokens=self.cached_tokens,
            ),
            finish_reason=delta.get("stop_reason"),
        )

    def on_message_stop(self, obj: dict[str, Any]) -> TokenEvent:
        return TokenEvent(done=True)


class AnthropicAdapter(EngineAdapter):
    name = "anthropic"
    description = "Anthropic Messages API: POST /v1/messages, streamed SSE events (plugin loadkit-anthropic)"
    apis = ("messages",)
    info_paths = ("/v1/models",)

    def base_headers(self) -> dict[str, str]:
        version = str(self.options.option("anthropic_version", API_VERSION))
        headers = {"Content-Type": "application/json", "Accept": self.accept, "anthropic-version": version}
        if self.options.api_key:
            headers["x-api-key"] = self.options.api_key
        headers.update(self.options.extra_headers)
        return headers

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        messages = request.as_messages()
        system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        body: dict[str, Any] = {
            "model": self.options.model or "claude-sonnet-4-5",
            "max_tokens": request.max_tokens,
            "messages": [m for m in messages if m.get("role") != "system"],
            "stream": True,
        }
        if system:
            body["system"] = system
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        return HttpRequest("POST", "/v1/messages", orjson.dumps(body), self.base_headers())

    def new_parser(self) -> StreamParser:
        return MessagesStreamParser()

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        models = responses.get("/v1/models")
        if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
            first = models["data"][0]
            if isinstance(first, dict) and first.get("id"):
                return {"model": self.options.model or first["id"]}
        return {}


def looks_like_anthropic(probes: dict[str, Any]) -> bool:
    """Anthropic's model list pages with has_more/first_id and types each entry "model"."""
    probe = probes.get("/v1/models") or {}
    body = probe.get("json") if probe.get("status") == 200 else None
    if not isinstance(body, dict) or "has_more" not in body or not isinstance(body.get("data"), list):
        return False
    return any(isinstance(m, dict) and m.get("type") == "model" for m in body["data"])
