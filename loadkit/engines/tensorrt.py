"""TensorRT-LLM: ``trtllm-serve``'s OpenAI API, and Triton's generate extension
(``POST /v2/models/<model>/generate_stream``) in front of the TensorRT-LLM backend.

trtllm-serve: OpenAI chunks; exact output with ``ignore_eos`` + ``min_tokens``.
Triton: body ``{"text_input", "max_tokens", "stream": true, ...}`` where keys are the model's
input tensors (the TensorRT-LLM ensemble's names); each SSE event is
``{"model_name", "model_version", "text_output", ...}``, one decoding step (one token without
speculative decoding) per event. ``text_output`` is a delta by default and cumulative when the
postprocessing model accumulates tokens; both are handled. An ``{"error": ...}`` event is an
in-band error. Triton has no end marker: the stream closing after the last response is the
normal end (``end_on_close``). Exact output: ``min_length`` = max_tokens; ``end_id`` is left
alone (its right value depends on the tokenizer; set it with extra_body when needed).
Model name: ``AdapterOptions.model`` (default ``ensemble``).
"""

from __future__ import annotations

from typing import Any

import orjson

from loadkit.core.adapter import StreamParser
from loadkit.core.kinds import CHAT
from loadkit.engines.common import AdapterExtras, TextDelta, ignore_eos_min_tokens, load_object
from loadkit.engines.openai import OpenAIAdapter, in_band_error_message
from loadkit.engines.vllm import UsageCountingParser
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent


class TritonGenerateParser(StreamParser):
    __slots__ = ("text",)

    def __init__(self) -> None:
        self.text = TextDelta()

    def parse(self, data: str, event: str | None = None) -> TokenEvent | None:
        obj = load_object(data)
        err = in_band_error_message(obj)
        if err is not None:
            return TokenEvent(error=err)
        out = obj.get("text_output")
        if isinstance(out, list) and len(out) == 1:  # batch dimension kept by some configs
            out = out[0]
        if not isinstance(out, str):
            raise MalformedEvent(f"generate_stream event has no text_output string: {data[:120]!r}")
        return TokenEvent(tokens=1, text=self.text.step(out))


class TensorRTLLMAdapter(OpenAIAdapter, AdapterExtras):
    name = "tensorrt-llm"
    description = (
        "TensorRT-LLM: trtllm-serve OpenAI API, or Triton /v2/models/<model>/generate_stream (api triton)"
    )
    apis = ("chat", "completions", "triton")
    image_apis = ()  # not checked against trtllm-serve's multimodal chat yet
    info_paths = ("/v2", "/v1/models")
    # trtllm-serve serves no embeddings or rerank endpoint: a run that sends them is refused.
    kind_wires = {}
    kind_paths = {}
    # "scheduled" = in this iteration's batch; "active" also counts requests the executor holds
    # without scheduling them; Triton's own queue is the pending count.
    metric_names = {
        'nv_trt_llm_request_metrics{request_type="scheduled"}': "running",
        'nv_trt_llm_request_metrics{request_type="active"}': "active_requests",
        'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used"}': "kv_blocks_used",
        'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max"}': "kv_blocks_max",
        "nv_inference_pending_request_count": "waiting",
    }

    @property
    def end_on_close(self) -> bool:  # type: ignore[override]
        return self.api == "triton"

    def build_request(self, request: GenerationRequest) -> HttpRequest:
        if request.kind != CHAT:
            return self.kind_request(request)
        if self.api != "triton":
            return super().build_request(request)
        model = self.options.model or "ensemble"
        path = f"/v2/models/{model}/generate_stream"
        return HttpRequest("POST", path, orjson.dumps(self.triton_body(request)), self.base_headers())

    def triton_body(self, request: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "text_input": request.as_prompt(),
            "max_tokens": request.max_tokens,
            "stream": True,
        }
        if request.exact_output:
            body["min_length"] = request.max_tokens
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        return body

    def exact_output_fields(self, request: GenerationRequest) -> dict[str, Any]:
        return ignore_eos_min_tokens(request)

    def new_parser(self) -> StreamParser:
        if self.api == "triton":
            return TritonGenerateParser()
        return UsageCountingParser(chat=self.api == "chat")

    def describe_server(self, responses: dict[str, Any]) -> dict[str, Any]:
        info = super().describe_server(responses)
        triton = responses.get("/v2")
        if isinstance(triton, dict) and triton.get("version"):
            info["engine_version"] = f"triton {triton['version']}"
        if self.api == "triton":
            info["model"] = self.options.model or "ensemble"
        return info
