"""vLLM: the OpenAI API plus vLLM's extras.

Exact output: ``ignore_eos`` + ``min_tokens`` = max_tokens. Tokens per event: vLLM repeats a
running ``usage`` on every chunk when ``stream_options.continuous_usage_stats`` is set (we ask
for it), so a chunk that carries two tokens (a held-back partial UTF-8 character, speculative
decoding) counts two; servers that ignore the option fall back to one token per text chunk.
Usage incl. ``prompt_tokens_details.cached_tokens`` (needs ``--enable-prompt-tokens-details``).
Reasoning: ``delta.reasoning_content`` (older) or ``delta.reasoning`` (newer), with a
reasoning parser enabled on the server. In-band errors: ``{"error": {...}}`` (current) or a
top-level ``{"object": "error", "message": ...}`` (older releases).
"""

from __future__ import annotations

from typing import Any

from loadkit.core.adapter import StreamParser
from loadkit.engines.common import (
    AdapterExtras,
    CounterDelta,
    count_from_tokens_field,
    ignore_eos_min_tokens,
    int_or_none,
    with_continuous_usage,
)
from loadkit.engines.openai import OpenAIAdapter, OpenAIStreamParser
from loadkit.types import GenerationRequest, HttpRequest, TokenEvent


def top_level_error(obj: dict[str, Any]) -> str | None:
    """The pre-2025 vLLM/SGLang ErrorResponse shape sent as a stream event."""
    if obj.get("object") == "error":
        return str(obj.get("message") or obj.get("type") or obj)
    return None


class UsageCountingParser(OpenAIStreamParser):
    """OpenAI chunks whose tokens come from the running usage count when the server sends one.

    Only a server that put usage on its first content chunk is sending running counts; a
    usage that first shows up on the last chunk (llama.cpp, servers ignoring
    ``continuous_usage_stats``) is a total, and must not be read as that chunk's tokens.
    """

    __slots__ = ("counter", "continuous")

    def __init__(self, chat: bool) -> None:
        super().__init__(chat)
        self.counter = CounterDelta()
        self.continuous: bool | None = None

    def chunk_event(self, obj: dict[str, Any]) -> TokenEvent:
        err = top_level_error(obj)
        if err is not None:
            return TokenEvent(error=err)
        event = super().chunk_event(obj)
        running = event.usage.completion_tokens if event.usage is not None else None
        if self.continuous is None and event.tokens > 0:
            self.continuous = running is not None
        if self.continuous and obj.get("choices") and running is not None:
            event.tokens = self.counter.step(running)
        return event


class VLLMAdapter(OpenAIAdapter, AdapterExtras):
    name = "vllm"
    description = (
        "vLLM OpenAI-compatible server: ignore_eos/min_tokens, per-chunk usage, /tokenize, vllm: metrics"
    )
    apis = ("chat", "completions")
    info_paths = ("/version", "/v1/models")
    metric_names = {
        "vllm:num_requests_running": "running",
        "vllm:num_requests_waiting": "waiting",
        "vllm:kv_cache_usage_perc": "kv_usage",
        "vllm:gpu_cache_usage_perc": "kv_usage",  # before v0.10
        "vllm:gpu_prefix_cache_hit_rate": "prefix_hit_rate",  # V0 engine gauge
        "vllm:prefix_cache_hits_total": "prefix_cache_hits",
        "vllm:prefix_cache_queries_total": "prefix_cache_queries",
        "vllm:num_preemptions_total": "preemptions_total",
        "vllm:prompt_tokens_total": "prompt_tokens_total",
        "vllm:generation_tokens_total": "generation_tokens_total",
    }

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        return with_continuous_usage(super().request_body(request))

    def exact_output_fields(self, request: GenerationRequest) -> dict[str, Any]:
        return ignore_eos_min_tokens(request)

    def new_parser(self) -> StreamParser:
        return UsageCountingParser(chat=self.api == "chat")

    def tokenize_request(self, text: str) -> HttpRequest | None:
        # Without BOS: the count is of the text alone (an exact prompt is this text).
        body = {"model": self.options.model or "default", "prompt": text, "add_special_tokens": False}
        return self.json_request("/tokenize", body)

    def parse_tokenize(self, body: Any) -> int | None:
        return count_from_tokens_field(body)

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        info = super().describe_server(responses)
        version = responses.get("/version")
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            info["engine_version"] = version["version"]
        models = responses.get("/v1/models")
        if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
            first = models["data"][0]
            if isinstance(first, dict) and int_or_none(first.get("max_model_len")) is not None:
                info["max_model_len"] = first["max_model_len"]
        return info
