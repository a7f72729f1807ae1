"""SGLang: its OpenAI API, and the native ``/generate`` endpoint.

OpenAI API: as vLLM (``ignore_eos``, running usage per chunk with ``continuous_usage_stats``,
``cached_tokens`` in ``prompt_tokens_details``, ``reasoning_content`` deltas).

Native ``POST /generate`` with ``stream: true``: every event repeats the whole output so far in
``text`` (unless the server runs with ``--incremental-streaming-output``) plus ``meta_info``
with running ``prompt_tokens``, ``completion_tokens`` and ``cached_tokens``; tokens per event
are the ``completion_tokens`` deltas, exact however many tokens an event carries
(``--stream-interval`` > 1 sends several). ``meta_info.finish_reason`` is null until the end,
then ``{"type": "length" | "stop" | "abort", ...}``; ``abort`` is an in-band error. The final
``meta_info`` carries ``e2e_latency`` (and ``queue_time`` with ``--enable-metrics``), in seconds,
passed through as server_timings. The stream ends with ``data: [DONE]``. Exact output: ``sampling_params.ignore_eos``.
"""

from __future__ import annotations

from typing import Any

import orjson

from loadkit.core.adapter import StreamParser
from loadkit.core.kinds import CHAT
from loadkit.engines.common import (
    AdapterExtras,
    CounterDelta,
    TextDelta,
    int_or_none,
    load_object,
    require_dict,
    with_continuous_usage,
)
from loadkit.engines.kinds import SGLANG_KINDS, paths_of
from loadkit.engines.openai import OpenAIAdapter, in_band_error_message
from loadkit.engines.vllm import UsageCountingParser
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage


class SGLangNativeParser(StreamParser):
    __slots__ = ("counter", "text")

    def __init__(self) -> None:
        self.counter = CounterDelta()
        self.text = TextDelta()

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        if data == "[DONE]":
            return TokenEvent(done=True)
        obj = load_object(data)
        err = in_band_error_message(obj)
        if err is not None:
            return TokenEvent(error=err)
        text = obj.get("text")
        if not isinstance(text, str):
            raise MalformedEvent(f"/generate event has no text: {data[:120]!r}")
        meta = require_dict(obj, "meta_info")
        finish, abort = finish_reason(meta.get("finish_reason"))
        if abort is not None:
            return TokenEvent(error=abort)
        running = int_or_none(meta.get("completion_tokens"))
        if running is None:
            raise MalformedEvent(f"meta_info has no completion_tokens: {data[:120]!r}")
        return TokenEvent(
            tokens=self.counter.step(running),
            text=self.text.step(text),
            usage=meta_usage(meta),
            finish_reason=finish,
            server_timings=meta_timings(meta) if finish is not None else None,
        )


def finish_reason(raw: Any) -> tuple[str | None, str | None]:
    """(finish reason, abort message): SGLang reports an abort as a finish reason."""
    if raw is None:
        return None, None
    if isinstance(raw, str):
        return raw, None
    if not isinstance(raw, dict):
        raise MalformedEvent(f"finish_reason is neither null, a string nor an object: {raw!r}")
    kind = str(raw.get("type"))
    if kind == "abort":
        return kind, str(raw.get("message") or "request aborted by the server")
    return kind, None


# Timing fields of the final meta_info: seconds; queue_time only with --enable-metrics.
TIMING_KEYS = ("e2e_latency", "queue_time", "prompt_tokens", "completion_tokens", "cached_tokens")


def meta_timings(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The final event's server timings, passed through as server_timings (None: none sent)."""
    if "e2e_latency" not in meta and "queue_time" not in meta:
        return None
    return {key: meta[key] for key in TIMING_KEYS if key in meta}


def meta_usage(meta: dict[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=int_or_none(meta.get("prompt_tokens")),
        completion_tokens=int_or_none(meta.get("completion_tokens")),
        cached_tokens=int_or_none(meta.get("cached_tokens")),
    )


class SGLangAdapter(OpenAIAdapter, AdapterExtras):
    name = "sglang"
    description = "SGLang: OpenAI API (chat, completions) and native /generate with meta_info token counts"
    apis = ("chat", "completions", "native")
    info_paths = ("/get_model_info", "/get_server_info", "/server_info", "/v1/models")
    # /v1/embeddings as OpenAI's; /v1/rerank answers a bare list (engines/kinds.py).
    kind_wires = SGLANG_KINDS
    kind_paths = paths_of(SGLANG_KINDS)
    metric_names = {
        "sglang:num_running_reqs": "running",
        "sglang:num_queue_reqs": "waiting",
        "sglang:token_usage": "kv_usage",
        "sglang:cache_hit_rate": "prefix_hit_rate",
        "sglang:prompt_tokens_total": "prompt_tokens_total",
        "sglang:generation_tokens_total": "generation_tokens_total",
    }

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != CHAT:
            return self.kind_request(request)
        if self.api != "native":
            return super().build_request(request)
        return HttpRequest("POST", "/generate", orjson.dumps(self.native_body(request)), self.base_headers())

    def native_body(self, request: GenerationRequest) -> dict[str, Any]:
        params: dict[str, Any] = {"max_new_tokens": request.max_tokens}
        if request.exact_output:
            params["ignore_eos"] = True
        body: dict[str, Any] = {"text": request.as_prompt(), "sampling_params": params, "stream": True}
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        return body

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        return with_continuous_usage(super().request_body(request))

    def exact_output_fields(self, request: GenerationRequest) -> dict[str, Any]:
        return {"ignore_eos": True} if request.exact_output else {}

    def new_parser(self) -> StreamParser:
        if self.api == "native":
            return SGLangNativeParser()
        return UsageCountingParser(chat=self.api == "chat")

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        info = super().describe_server(responses)
        model = responses.get("/get_model_info")
        if isinstance(model, dict) and model.get("model_path"):
            info["model"] = model["model_path"]
        for path in ("/get_server_info", "/server_info"):
            server = responses.get(path)
            if isinstance(server, dict) and isinstance(server.get("version"), str):
                info["engine_version"] = server["version"]
        return info
