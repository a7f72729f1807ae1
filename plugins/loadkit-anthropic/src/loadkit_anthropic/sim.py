"""The Messages API as a ``loadkit sim`` protocol: ``loadkit sim --engine anthropic``.

Only the framing lives here; the simulator's scheduler, prefix cache, faults and truth log
apply unchanged. Events as the API sends them: ``message_start`` and ``content_block_start``
before the first token, a ``content_block_delta`` per step, then ``content_block_stop``,
``message_delta`` (stop reason and usage) and ``message_stop``; an ``error`` event for the
simulator's ``error_event`` fault. The API has no ignore_eos: output ends at a seeded EOS or
at ``max_tokens`` (stop reason ``max_tokens``).
"""

from __future__ import annotations

from typing import Any

from loadkit.sim.protocols import (
    GenRoute,
    Outcome,
    Reply,
    RequestSpec,
    SimProtocol,
    StreamFormat,
    as_int,
    dumps,
    json_str,
    messages_prompt,
)


def parse_messages(body: dict[str, Any], default_max: int, model: str) -> RequestSpec:
    """A Messages request; ValueError (-> 400 invalid_request_error) for what the API refuses."""
    if "max_tokens" not in body:
        raise ValueError("max_tokens: Field required")
    max_tokens = as_int(body, "max_tokens", default_max)
    if max_tokens < 1:
        raise ValueError("max_tokens: Input should be greater than or equal to 1")
    messages = body.get("messages")
    system = body.get("system")
    if isinstance(system, str) and system and isinstance(messages, list):
        messages = [{"role": "system", "content": system}, *messages]
    return RequestSpec(
        prompt=messages_prompt(messages),
        max_tokens=max_tokens,
        stream=bool(body.get("stream")),
        model=str(body.get("model") or model),
    )


def error_body(status: int, message: str) -> bytes:
    kind = {400: "invalid_request_error", 429: "rate_limit_error", 503: "overloaded_error"}.get(
        status, "api_error"
    )
    return dumps({"type": "error", "error": {"type": kind, "message": message}})


def event(name: bytes, obj: dict[str, Any]) -> bytes:
    return b"event: " + name + b"\ndata: " + dumps(obj) + b"\n\n"


class MessagesFormat(StreamFormat):
    fixed_frame = True  # a delta is the same bytes around its text: the simulator's fast path

    def usage(self, out: Outcome | None) -> dict[str, int]:
        prompt, cached = (out.prompt_tokens, out.cached_tokens) if out else (self.n_prompt, self.n_cached)
        # input_tokens excludes cache reads, as the API counts them.
        return {
            "input_tokens": prompt - cached,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
            "output_tokens": out.completion_tokens if out else 1,
        }

    def start(self) -> bytes:
        message = {
            "id": f"msg_{self.rid}",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.spec.model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage(None),
        }
        return event(b"message_start", {"type": "message_start", "message": message}) + event(
            b"content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )

    def token(self, text: bytes, index: int, n: int) -> bytes:
        return (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":%s}}\n\n' % json_str(text)
        )

    def end(self, out: Outcome) -> bytes:
        stop = "max_tokens" if out.finish_reason == "length" else "end_turn"
        return (
            event(b"content_block_stop", {"type": "content_block_stop", "index": 0})
            + event(
                b"message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": self.usage(out),
                },
            )
            + event(b"message_stop", {"type": "message_stop"})
        )

    def error(self, message: str) -> bytes:
        return event(b"error", {"type": "error", "error": {"type": "api_error", "message": message}})

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{\n\n'

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps(
            {
                "id": f"msg_{self.rid}",
                "type": "message",
                "role": "assistant",
                "model": self.spec.model,
                "content": [{"type": "text", "text": text.decode()}],
                "stop_reason": "max_tokens" if out.finish_reason == "length" else "end_turn",
                "stop_sequence": None,
                "usage": self.usage(out),
            }
        )


def info_routes(engine: Any) -> dict[tuple[str, str], Any]:
    """The model list ``--engine auto`` recognises (paged, entries typed "model")."""
    models = dumps(
        {
            "data": [
                {
                    "type": "model",
                    "id": engine.model,
                    "display_name": engine.model,
                    "created_at": "2025-01-01T00:00:00Z",
                }
            ],
            "has_more": False,
            "first_id": engine.model,
            "last_id": engine.model,
        }
    )

    def list_models(_: bytes) -> Reply:
        return 200, models, "application/json"

    return {("GET", "/v1/models"): list_models}


PROTOCOL = SimProtocol(
    name="anthropic",
    routes={"/v1/messages": GenRoute(parse_messages, MessagesFormat, error_body)},
    info=info_routes,
    version="2023-06-01",
    server_header=b"loadkit-sim-anthropic",
    description="Anthropic Messages API (plugin loadkit-anthropic)",
)
