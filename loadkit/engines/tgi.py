"""Hugging Face Text Generation Inference: native ``/generate_stream`` and its OpenAI chat API.

Native stream: one event per generated token, ``{"index", "token": {"id", "text", "logprob",
"special"}, "generated_text": null, "details": null}``; the last event carries
``generated_text`` and ``details`` (``finish_reason``, ``generated_tokens``, ``input_length``
on 2.x). That last event is the normal end: TGI sends no ``[DONE]`` on this route. A special
token (EOS) counts as a token but adds no text. In-band errors: ``{"error", "error_type"}``.
Exact output: TGI has no ``ignore_eos``; requests stop at EOS, so n_out can be < max_tokens
(recorded per request from ``details.generated_tokens``). Cached tokens: not reported.
"""

from __future__ import annotations

from typing import Any

import orjson

from loadkit.core.adapter import StreamParser
from loadkit.core.kinds import CHAT
from loadkit.engines.common import AdapterExtras, int_or_none, load_object, require_dict
from loadkit.engines.kinds import TEI_KINDS, paths_of
from loadkit.engines.openai import OpenAIAdapter
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage


class TGIStreamParser(StreamParser):
    __slots__ = ()

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        obj = load_object(data)
        if "error" in obj:
            kind = obj.get("error_type")
            return TokenEvent(error=f"{kind}: {obj['error']}" if kind else str(obj["error"]))
        token = require_dict(obj, "token")
        if not isinstance(token.get("text"), str):
            raise MalformedEvent(f"token has no text: {data[:120]!r}")
        text = "" if token.get("special") else token["text"]
        details = obj.get("details")
        if details is None:
            return TokenEvent(tokens=1, text=text)
        if not isinstance(details, dict):
            raise MalformedEvent(f"details is not an object: {data[:120]!r}")
        usage = Usage(
            prompt_tokens=int_or_none(details.get("input_length")),
            completion_tokens=int_or_none(details.get("generated_tokens")),
        )
        return TokenEvent(
            tokens=1, text=text, done=True, usage=usage, finish_reason=details.get("finish_reason")
        )


class TGIAdapter(OpenAIAdapter, AdapterExtras):
    name = "tgi"
    description = "Hugging Face TGI: native /generate_stream (one token per event) and /v1/chat/completions"
    apis = ("native", "chat")
    image_apis = ()  # not checked against a TGI vision model yet
    # Text Embeddings Inference, TGI's sibling server: /embed and /rerank (engines/kinds.py).
    kind_wires = TEI_KINDS
    kind_paths = paths_of(TEI_KINDS)
    info_paths = ("/info",)
    metric_names = {
        "tgi_batch_current_size": "running",
        "tgi_queue_size": "waiting",
        "tgi_batch_current_max_tokens": "batch_tokens",
        "tgi_request_generated_tokens_sum": "generation_tokens_total",
    }

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != CHAT:
            return self.kind_request(request)
        if self.api != "native":
            return super().build_request(request)
        params: dict[str, Any] = {"max_new_tokens": request.max_tokens, "details": True}
        # the route itself streams; TGI's GenerateRequest has no "stream" field
        body: dict[str, Any] = {"inputs": request.as_prompt(), "parameters": params}
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        return HttpRequest("POST", "/generate_stream", orjson.dumps(body), self.base_headers())

    def new_parser(self) -> StreamParser:
        return TGIStreamParser() if self.api == "native" else super().new_parser()

    def tokenize_request(self, text: str) -> HttpRequest | None:
        return self.json_request("/tokenize", {"inputs": text})

    def parse_tokenize(self, body: Any) -> int | None:
        return len(body) if isinstance(body, list) else None

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        info = responses.get("/info")
        if not isinstance(info, dict):
            return {}
        out: dict[str, Any] = {}
        for key, name in (
            ("model_id", "model"),
            ("version", "engine_version"),
            ("max_total_tokens", "max_model_len"),
        ):
            if info.get(key) is not None:
                out[name] = info[key]
        return out
