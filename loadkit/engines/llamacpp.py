"""llama.cpp's ``llama-server``: native ``/completion`` and its OpenAI API.

Native stream (recorded from a real server, tests/engines/fixtures/llamacpp/): each event is
``{"content", "tokens": [ids], "stop": false, "tokens_predicted", "tokens_evaluated"}``; tokens
per event = growth of ``tokens_predicted`` (``len(tokens)`` when the count is absent). The last event has ``stop: true``, ``stop_type``
(``limit`` | ``eos`` | ``word``), totals, and ``timings`` (``cache_n`` = prompt tokens reused
from the cache, ``prompt_ms``, ``predicted_ms``...), passed through as server_timings. No
``[DONE]`` on this route. Exact output: ``n_predict`` + ``ignore_eos``.

OpenAI API: chunks carry one token's text each; usage (with ``cached_tokens``) and ``timings``
arrive on the last chunk; ``reasoning_content`` deltas with a reasoning format enabled.

Errors: llama-server sends a stream error as an SSE ``error:`` field, not ``data:``; a decoder
that passes it on as event "error" gets it classified here as an in-band error.
"""

from __future__ import annotations

from typing import Any

import orjson

from loadkit.core.adapter import StreamParser
from loadkit.core.kinds import CHAT
from loadkit.engines.common import AdapterExtras, count_from_tokens_field, int_or_none, load_object
from loadkit.engines.openai import OpenAIAdapter, OpenAIStreamParser, in_band_error_message
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage

STOP_TYPES = {"limit": "length", "eos": "stop", "word": "stop"}


def error_event_message(data: str) -> str:
    """The message of an ``error:`` event: ``{"code", "message", "type"}``, or raw text."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data[:200]
    if isinstance(obj, dict):
        return in_band_error_message(obj) or str(obj.get("message") or obj)
    return str(obj)


class LlamaCppNativeParser(StreamParser):
    """Tokens per event from the growth of ``tokens_predicted`` where sent: a token held back
    as a partial UTF-8 character arrives with the next one (``tokens`` lists one id while the
    count grows by two), and the final event may carry tokens no earlier event listed."""

    __slots__ = ("predicted",)

    def __init__(self) -> None:
        self.predicted = 0

    def _tokens_in(self, obj: dict[str, Any], content: str) -> int:
        total = int_or_none(obj.get("tokens_predicted"))
        if total is not None and total >= self.predicted:
            k, self.predicted = total - self.predicted, total
            return k
        tokens = obj.get("tokens")
        k = len(tokens) if isinstance(tokens, list) else (1 if content else 0)
        self.predicted += k
        return k

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        if event == "error":
            return TokenEvent(error=error_event_message(data))
        obj = load_object(data)
        err = in_band_error_message(obj)
        if err is not None:
            return TokenEvent(error=err)
        content = obj.get("content")
        if not isinstance(content, str) or not isinstance(obj.get("stop"), bool):
            raise MalformedEvent(f"/completion event lacks content or stop: {data[:120]!r}")
        k = self._tokens_in(obj, content)
        if not obj["stop"]:
            return TokenEvent(tokens=k, text=content)
        return final_event(obj, k, content)


def final_event(obj: dict[str, Any], k: int, content: str) -> TokenEvent:
    timings = obj.get("timings") if isinstance(obj.get("timings"), dict) else None
    usage = Usage(
        prompt_tokens=int_or_none(obj.get("tokens_evaluated")),
        completion_tokens=int_or_none(obj.get("tokens_predicted")),
        cached_tokens=int_or_none(timings.get("cache_n")) if timings else None,
    )
    stop_type = obj.get("stop_type")
    finish = STOP_TYPES.get(stop_type, stop_type) if isinstance(stop_type, str) else None
    return TokenEvent(
        tokens=k, text=content, done=True, usage=usage, finish_reason=finish, server_timings=timings
    )


class LlamaCppOpenAIParser(OpenAIStreamParser):
    __slots__ = ()

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        if event == "error":
            return TokenEvent(error=error_event_message(data))
        return super().parse(data, event)


class LlamaCppAdapter(OpenAIAdapter, AdapterExtras):
    name = "llamacpp"
    description = "llama.cpp llama-server: native /completion (token ids per event, timings) and OpenAI API"
    apis = ("native", "chat", "completions")
    info_paths = ("/props", "/v1/models")
    metric_names = {
        "llamacpp:requests_processing": "running",
        "llamacpp:requests_deferred": "waiting",
        "llamacpp:kv_cache_usage_ratio": "kv_usage",  # removed in 2025 builds
        "llamacpp:prompt_tokens_cached_total": "prefix_cache_hits",
        "llamacpp:prompt_tokens_total": "prefix_cache_misses",  # excludes cached tokens
        "llamacpp:tokens_predicted_total": "generation_tokens_total",
    }

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != CHAT:
            return self.kind_request(request)
        if self.api != "native":
            return super().build_request(request)
        body: dict[str, Any] = {
            "prompt": request.as_prompt(),
            "n_predict": request.max_tokens,
            "stream": True,
            "cache_prompt": True,
        }
        body.update(self.exact_output_fields(request))
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        return HttpRequest("POST", "/completion", orjson.dumps(body), self.base_headers())

    def exact_output_fields(self, request: GenerationRequest) -> dict[str, Any]:
        return {"ignore_eos": True} if request.exact_output else {}

    def new_parser(self) -> StreamParser:
        if self.api == "native":
            return LlamaCppNativeParser()
        return LlamaCppOpenAIParser(chat=self.api == "chat")

    def tokenize_request(self, text: str) -> HttpRequest | None:
        # Without BOS/EOS: the count is of the text alone (an exact prompt is this text).
        return self.json_request("/tokenize", {"content": text, "add_special": False})

    def parse_tokenize(self, body: Any) -> int | None:
        return count_from_tokens_field(body)

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        info = super().describe_server(responses)
        props = responses.get("/props")
        if isinstance(props, dict):
            if isinstance(props.get("build_info"), str):
                info["engine_version"] = props["build_info"]
            if isinstance(props.get("model_path"), str):
                info.setdefault("model", props["model_path"])
            settings = props.get("default_generation_settings")
            if isinstance(settings, dict) and int_or_none(settings.get("n_ctx")) is not None:
                info["max_model_len"] = settings["n_ctx"]
            if int_or_none(props.get("total_slots")) is not None:
                info["slots"] = props["total_slots"]
        return info
