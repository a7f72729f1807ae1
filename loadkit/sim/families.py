"""The built-in engine families' data: which routes a port serves, and each engine's error shapes.

A port serves one family. ``openai`` is vLLM (OpenAI routes plus vLLM's extras); the others
serve their native API plus the OpenAI routes the real engine also has. The tables here are
registered as simulator protocols by ``loadkit.sim.builtin`` through the same hook a plugin
uses; the simulator looks every family up through ``loadkit.sim.protocols``, never here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loadkit.sim.wire import kinds as kin
from loadkit.sim.wire import native as nat
from loadkit.sim.wire import openai as oai
from loadkit.sim.wire.common import RequestSpec, StreamFormat

Parser = Callable[[dict[str, Any], int, str], RequestSpec]


@dataclass(frozen=True, slots=True)
class GenRoute:
    """A generation endpoint: how to read the body, how to write the answer."""

    parse: Parser
    fmt: type[StreamFormat]
    error: Callable[[int, str], bytes]
    bad_status: int = 400  # status for a malformed body
    stream: bool | None = None  # the URL decides streaming (TGI, Triton), not the body


def _oai(chat: bool) -> Parser:
    return lambda body, dmax, model: oai.parse_openai(body, chat, dmax, model)


def _ollama(chat: bool) -> Parser:
    return lambda body, dmax, model: nat.parse_ollama(body, chat, dmax, model)


def _oai_error(status: int, message: str) -> bytes:
    return oai.openai_error(status, message)


def _llama_error(status: int, message: str) -> bytes:
    return oai.llama_error(status, message)


VLLM_ROUTES = {
    "/v1/completions": GenRoute(_oai(False), oai.VllmCompletion, _oai_error),
    "/v1/chat/completions": GenRoute(_oai(True), oai.VllmChat, _oai_error),
}
LLAMA_ROUTES = {
    "/v1/completions": GenRoute(_oai(False), oai.LlamaCompletion, _llama_error),
    "/v1/chat/completions": GenRoute(_oai(True), oai.LlamaChat, _llama_error),
    "/completion": GenRoute(nat.parse_llama_native, nat.LlamaNative, _llama_error),
    "/completions": GenRoute(nat.parse_llama_native, nat.LlamaNative, _llama_error),
}

# Embeddings and rerank (sim/wire/kinds.py), as each engine serves them (docs/engines.md).
OAI_EMBEDDINGS = GenRoute(kin.openai_embeddings, kin.OpenAIEmbeddingsAnswer, _oai_error)
VLLM_KINDS = {
    "/v1/embeddings": OAI_EMBEDDINGS,
    # vLLM serves the same Jina/Cohere-style rerank at three paths.
    **{
        p: GenRoute(kin.openai_rerank, kin.OpenAIRerankAnswer, _oai_error)
        for p in ("/v1/rerank", "/rerank", "/v2/rerank")
    },
}
SGLANG_KINDS = {
    "/v1/embeddings": GenRoute(kin.openai_embeddings, kin.OpenAIEmbeddingsAnswer, nat.sglang_error),
    "/v1/rerank": GenRoute(kin.openai_rerank, kin.SGLangRerankAnswer, nat.sglang_error),
}
TEI_KINDS = {  # Text Embeddings Inference, served on the TGI family's port
    "/embed": GenRoute(kin.tei_embed, kin.TEIEmbedAnswer, nat.tgi_error, 422),
    "/rerank": GenRoute(kin.tei_rerank, kin.TEIRerankAnswer, nat.tgi_error, 422),
    "/v1/embeddings": GenRoute(kin.openai_embeddings, kin.OpenAIEmbeddingsAnswer, nat.tgi_error, 422),
}
LLAMA_KINDS = {
    **{
        p: GenRoute(kin.openai_embeddings, kin.OpenAIEmbeddingsAnswer, _llama_error)
        for p in ("/v1/embeddings", "/embeddings")
    },
    **{
        p: GenRoute(kin.openai_rerank, kin.OpenAIRerankAnswer, _llama_error)
        for p in ("/v1/rerank", "/rerank", "/reranking")
    },
}
OLLAMA_KINDS = {
    "/api/embed": GenRoute(kin.openai_embeddings, kin.OllamaEmbedAnswer, nat.ollama_error),
    "/v1/embeddings": GenRoute(kin.openai_embeddings, kin.OpenAIEmbeddingsAnswer, _oai_error),
}

ROUTES: dict[str, dict[str, GenRoute]] = {
    "openai": {**VLLM_ROUTES, **VLLM_KINDS},
    "sglang": {
        **VLLM_ROUTES,
        **SGLANG_KINDS,
        "/generate": GenRoute(nat.parse_sglang, nat.SglangGenerate, nat.sglang_error),
    },
    "tgi": {
        **VLLM_ROUTES,
        **TEI_KINDS,
        "/generate_stream": GenRoute(nat.parse_tgi, nat.TgiGenerateStream, nat.tgi_error, 422, True),
        "/generate": GenRoute(nat.parse_tgi, nat.TgiGenerateStream, nat.tgi_error, 422, False),
    },
    "triton": {  # Triton's generate extension; trtllm-serve's OpenAI routes too
        **VLLM_ROUTES,
        "generate_stream": GenRoute(nat.parse_triton, nat.TritonGenerate, nat.triton_error, 400, True),
        "generate": GenRoute(nat.parse_triton, nat.TritonGenerate, nat.triton_error, 400, False),
    },
    "llamacpp": {**LLAMA_ROUTES, **LLAMA_KINDS},
    "ollama": {
        **VLLM_ROUTES,
        **OLLAMA_KINDS,
        "/api/generate": GenRoute(_ollama(False), nat.OllamaGenerate, nat.ollama_error),
        "/api/chat": GenRoute(_ollama(True), nat.OllamaChat, nat.ollama_error),
    },
}
FAMILIES = tuple(ROUTES)
# What `loadkit plugins` says of each built-in family (docs/simulator.md has the routes in full).
DESCRIPTIONS = {
    "openai": "vLLM: the OpenAI completions and chat routes, with vLLM's extras",
    "sglang": "SGLang: native /generate (cumulative text) and the OpenAI routes",
    "tgi": "Text Generation Inference: /generate_stream, /generate and the OpenAI routes",
    "triton": "TensorRT-LLM: Triton's generate extension and trtllm-serve's OpenAI routes",
    "llamacpp": "llama.cpp server: native /completion and the OpenAI routes",
    "ollama": "Ollama: /api/generate, /api/chat (NDJSON) and the OpenAI routes",
}

SERVER_HEADER = {"openai": b"uvicorn", "sglang": b"uvicorn", "llamacpp": b"llama.cpp"}


def match_route(family: str, routes: Mapping[str, GenRoute], path: str) -> GenRoute | None:
    """The generation route of ``routes`` for a path (Triton's carry the model name)."""
    if family == "triton" and path.startswith("/v2/models/"):
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[3] in ("generate", "generate_stream"):
            return routes[parts[3]]
        return None
    return routes.get(path) if path.startswith("/") else None


def context_error(
    family: str, routes: Mapping[str, GenRoute], n_prompt: int, max_out: int, limit: int
) -> tuple[int, bytes]:
    """Each engine's answer to a prompt + max_tokens over the context length (``routes``: the
    family's generation routes, whose error shape a plugin's protocol answers with)."""
    total = n_prompt + max_out
    if family == "tgi":
        msg = (
            f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {limit}. "
            f"Given: {n_prompt} `inputs` tokens and {max_out} `max_new_tokens`"
        )
        return 422, nat.tgi_error(422, msg)
    if family == "llamacpp":
        return 400, oai.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": n_prompt,
                    "n_ctx": limit,
                }
            }
        )
    if family == "sglang":
        return 400, nat.sglang_error(
            400,
            f"Requested token count exceeds the model's maximum context length of {limit} tokens. "
            f"You requested a total of {total} tokens: {n_prompt} tokens from the input messages "
            f"and {max_out} tokens for the completion.",
        )
    msg = (
        f"This model's maximum context length is {limit} tokens. However, you requested {total} tokens "
        f"({n_prompt} in the messages, {max_out} in the completion). Please reduce the length of the messages or completion."
    )
    if family == "openai":
        return 400, oai.openai_error(400, msg)
    if family not in ROUTES:  # a plugin's protocol: its own error shape
        return 400, next(iter(routes.values())).error(400, msg)
    return 400, oai.dumps({"error": msg})
