"""Pieces every built-in adapter shares: strict JSON decoding of one stream message, token
counts from cumulative counters, deltas from cumulative text. ``AdapterExtras``, the optional
extras an adapter may offer beyond the base contract (tokenize endpoint, metrics path), is part
of the contract (``loadkit.core.adapter``) and re-exported here, the public path plugins use.
"""

from __future__ import annotations

from typing import Any

import orjson

from loadkit.core.adapter import AdapterExtras
from loadkit.types import GenerationRequest, MalformedEvent

__all__ = [
    "AdapterExtras",
    "CounterDelta",
    "TextDelta",
    "count_from_tokens_field",
    "ignore_eos_min_tokens",
    "int_or_none",
    "load_object",
    "require_dict",
    "with_continuous_usage",
]


def load_object(data: str) -> dict[str, Any]:
    """One stream message as a JSON object, or MalformedEvent naming what was wrong."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedEvent(f"invalid JSON in stream event: {exc}: {data[:120]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedEvent(f"stream event is not a JSON object: {data[:120]!r}")
    return obj


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def require_dict(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise MalformedEvent(f"field {key!r} is not an object: {str(obj)[:120]!r}")
    return value


class CounterDelta:
    """Tokens per event from a cumulative count the engine repeats on every event
    (SGLang meta_info.completion_tokens, vLLM continuous usage, llama.cpp tokens_predicted).

    A count that goes backwards is a broken stream, not something to paper over.
    """

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = 0

    def step(self, cumulative: int) -> int:
        if cumulative < self.last:
            raise MalformedEvent(f"cumulative token count went backwards: {self.last} -> {cumulative}")
        delta, self.last = cumulative - self.last, cumulative
        return delta


class TextDelta:
    """New text from engines that may repeat the whole output so far on each event
    (SGLang native without --incremental-streaming-output, Triton postprocessing with
    accumulate_tokens). Text that extends what was seen is cumulative; anything else is
    taken as a plain delta. The heuristic only shapes `text`; token counts never rely on it.
    """

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = ""

    def step(self, text: str) -> str:
        if self.seen and text.startswith(self.seen):
            delta = text[len(self.seen) :]
            self.seen = text
            return delta
        self.seen += text
        return text


def count_from_tokens_field(body: Any) -> int | None:
    """``{"tokens": [...]}`` or ``{"count": n}`` (vLLM, llama.cpp, SGLang tokenize)."""
    if not isinstance(body, dict):
        return None
    count = int_or_none(body.get("count"))
    if count is not None:
        return count
    tokens = body.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def with_continuous_usage(body: dict[str, Any]) -> dict[str, Any]:
    """Ask for usage on every chunk (vLLM's `continuous_usage_stats`, also honoured by SGLang and
    trtllm-serve): per-chunk counts make tokens per event exact when chunks carry several."""
    if body.get("stream_options") == {"include_usage": True}:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return body


def ignore_eos_min_tokens(request: GenerationRequest) -> dict[str, Any]:
    """Exactly max_tokens: vLLM's (and trtllm-serve's) `ignore_eos` plus `min_tokens`."""
    if not request.exact_output:
        return {}
    return {"ignore_eos": True, "min_tokens": request.max_tokens}
