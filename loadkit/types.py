"""Plain data types shared by every stage: requests going out, events coming back.

Nothing here imports Locust or gevent, so workloads, adapters and stats can be tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Every request ends in exactly one of these (docs/metrics.md, docs/reports.md "Outcomes of a request"). http_error carries its status
# as a suffix: "http_error:503".
OK = "ok"
CONNECT_ERROR = "connect_error"
TLS_ERROR = "tls_error"  # https:// connection set-up failed (untrusted, hostname, version, timeout)
TIMEOUT_FIRST_TOKEN = "timeout_first_token"
TIMEOUT_TOTAL = "timeout_total"
DISCONNECTED = "disconnected"
INCOMPLETE = "incomplete"
IN_BAND_ERROR = "in_band_error"
MALFORMED_STREAM = "malformed_stream"
# The adapter's own code raised (anything but MalformedEvent): a bug in the engine's plugin,
# not the server's doing; a failure all the same (client/adaptererr.py names the plugin).
ADAPTER_ERROR = "adapter_error"
CANCELLED = "cancelled"
HTTP_ERROR_PREFIX = "http_error:"

OUTCOMES = (
    OK,
    CONNECT_ERROR,
    TLS_ERROR,
    TIMEOUT_FIRST_TOKEN,
    TIMEOUT_TOTAL,
    DISCONNECTED,
    INCOMPLETE,
    IN_BAND_ERROR,
    MALFORMED_STREAM,
    ADAPTER_ERROR,
    CANCELLED,
)


def http_error(status: int) -> str:
    return f"{HTTP_ERROR_PREFIX}{status}"


def is_known_outcome(outcome: str) -> bool:
    if outcome in OUTCOMES:
        return True
    return outcome.startswith(HTTP_ERROR_PREFIX) and outcome[len(HTTP_ERROR_PREFIX) :].isdigit()


# The request header that asks loadkit's simulator for a reasoning length (tokens); real
# servers ignore it. Written by the client (client/timer.py), read by the simulator (sim/server.py).
REASONING_HINT_HEADER = "x-loadkit-reasoning-tokens"


@dataclass(slots=True)
class GenerationRequest:
    """One generation a workload asks for, engine-neutral.

    Exactly one of ``prompt`` (completion endpoints) or ``messages`` (chat endpoints) is the
    source of truth; adapters convert when the endpoint wants the other shape.
    """

    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    max_tokens: int = 128
    # Ask the engine to generate exactly max_tokens (ignore_eos / min_tokens) where it can.
    exact_output: bool = True
    label: str = "default"
    n_in_target: int | None = None
    session_id: str | None = None
    turn: int | None = None
    # Tokens of this prompt the workload expects to be a prefix already seen by the server.
    expected_cached_tokens: int | None = None
    # Monotonic ns at which the request was meant to be sent (open loop); None in closed loop.
    t_sched_ns: int | None = None
    stage: str | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    # The tenant's priority (lower first); each target places it (body field or header, priority.py).
    priority: int | None = None
    # The split of max_tokens the workload expects (a ServeGen reasoning trace's reason_ratio):
    # tokens spent reasoning and the answer's rest; None where the workload says nothing.
    expected_reasoning_tokens: int | None = None
    expected_answer_tokens: int | None = None
    # Send expected_reasoning_tokens as the REASONING_HINT_HEADER: loadkit's simulator reasons
    # that long, a real server ignores an unknown header (it decides its own reasoning length).
    reasoning_hint: bool = False
    # Images in the last user message's content parts (workload/images.py): how many, their
    # pixels in all, and the image tokens expected of them (loadkit/imagetokens.py).
    image_count: int = 0
    image_pixels: int = 0
    image_tokens_expected: int | None = None
    # The request's kind (loadkit.core.kinds): "chat" (streamed generation), "embeddings",
    # "rerank", or a plugin's. Non-chat kinds leave prompt/messages None.
    kind: str = "chat"
    # embeddings: the inputs one request embeds (its batch is len(inputs)).
    inputs: list[str] | None = None
    # rerank: the query and the documents scored against it; top_n as asked (None: all).
    query: str | None = None
    documents: list[str] | None = None
    top_n: int | None = None
    # A plugin kind's own neutral fields (its RequestKind.build fills them).
    kind_fields: dict[str, Any] = field(default_factory=dict)
    # Items in the request (inputs, documents, a plugin kind's units): the report's per-item figures.
    n_items: int | None = None

    def as_prompt(self) -> str:
        """The request as one prompt string, for completion endpoints given chat messages."""
        if self.prompt is not None:
            return self.prompt
        parts = [f"<|{m.get('role', 'user')}|>\n{m.get('content') or ''}\n" for m in self.messages or []]
        return "".join(parts) + "<|assistant|>\n"

    def as_messages(self) -> list[dict[str, Any]]:
        if self.messages is not None:
            return self.messages
        return [{"role": "user", "content": self.prompt or ""}]


@dataclass(slots=True)
class HttpRequest:
    """What an adapter wants sent: the stream timer owns the connection."""

    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Usage:
    """Token counts as the server reported them; None where it did not say."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    image_tokens: int | None = None  # prompt_tokens_details.image_tokens, where the server says


@dataclass(slots=True)
class TokenEvent:
    """What an adapter made of one stream message (an SSE event or an NDJSON line).

    ``tokens`` is the number of output tokens the message carries (0 for role-only chunks,
    keep-alives, usage-only chunks). ``done`` marks the engine's normal end of stream.
    ``error`` is an in-band error message the engine sent inside a 200 stream.
    """

    tokens: int = 0
    text: str = ""
    reasoning_text: str = ""
    done: bool = False
    usage: Usage | None = None
    error: str | None = None
    finish_reason: str | None = None
    # Engine-reported server-side timings (e.g. llama.cpp's `timings`), passed through.
    server_timings: dict[str, Any] | None = None


class MalformedEvent(ValueError):
    """An adapter could not make sense of a stream message; the request is `malformed_stream`."""
