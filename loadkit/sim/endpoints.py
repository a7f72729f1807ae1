"""The small endpoints tools look at: models, version/info, health, tokenize, metrics, stats.

Each returns ``(status, body, content_type)``; None means "no such route here" (404).
``GET /loadkit/sim/stats`` is the simulator's own: step counts and event lateness.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from loadkit.sim.metrics import METRICS
from loadkit.sim.textgen import detokenize_ids, tokenize, tokenize_pieces
from loadkit.sim.wire.common import messages_prompt, parse_json_object

if TYPE_CHECKING:
    from loadkit.sim.server import SimEngine

Reply = tuple[int, bytes, str]
Handler = Callable[[bytes], Reply]
JSON = "application/json"
VERSIONS = {"openai": "0.11.0", "sglang": "0.5.3", "tgi": "3.3.6", "triton": "2.59.0",
            "llamacpp": "b6800", "ollama": "0.12.6"}  # fmt: skip


def _json(obj: Any, status: int = 200) -> Reply:
    return status, orjson.dumps(obj), JSON


def _models(e: SimEngine, owner: str) -> Reply:
    return _json({"object": "list", "data": [{
        "id": e.model, "object": "model", "created": e.created, "owned_by": owner, "root": e.model,
        "parent": None, "max_model_len": e.profile.max_model_len}]})  # fmt: skip


def _body_prompt(body: bytes, keys: tuple[str, ...]) -> str:
    obj = parse_json_object(body)
    if "messages" in obj:
        return messages_prompt(obj["messages"])
    for key in keys:
        if isinstance(obj.get(key), str):
            return str(obj[key])
    raise ValueError(f"missing {' or '.join(keys)}")


def _vllm_tokenize(e: SimEngine, body: bytes) -> Reply:
    ids = tokenize(_body_prompt(body, ("prompt",)))
    return _json(
        {"count": len(ids), "max_model_len": e.profile.max_model_len, "tokens": ids, "token_strs": None}
    )


def _detokenize(body: bytes, key: str) -> Reply:
    tokens = parse_json_object(body).get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise ValueError("tokens must be a list of integers")
    return _json({key: detokenize_ids(tokens)})


def _tgi_tokenize(body: bytes) -> Reply:
    pieces = tokenize_pieces(_body_prompt(body, ("inputs",)))
    out, pos = [], 0
    for piece, tid in zip(pieces, tokenize("".join(pieces)), strict=True):
        out.append({"id": tid, "text": piece, "start": pos, "stop": pos + len(piece)})
        pos += len(piece)
    return _json(out)


def _llama_props(e: SimEngine) -> Reply:
    return _json(
        {
            "default_generation_settings": {"n_ctx": e.profile.max_model_len, "params": {}},
            "total_slots": e.profile.max_num_seqs,
            "model_path": e.model,
            "build_info": VERSIONS["llamacpp"],
        }
    )


def _ollama_tags(e: SimEngine) -> Reply:
    return _json(
        {
            "models": [
                {
                    "name": e.model,
                    "model": e.model,
                    "modified_at": "2025-01-01T00:00:00Z",
                    "size": 4_900_000_000,
                    "digest": "0" * 64,
                    "details": {
                        "format": "gguf",
                        "family": "llama",
                        "parameter_size": "8B",
                        "quantization_level": "Q4_K_M",
                    },
                }
            ]
        }
    )


def _triton_model(e: SimEngine) -> Reply:
    return _json(
        {
            "name": e.model,
            "versions": ["1"],
            "platform": "ensemble",
            "inputs": [
                {"name": "text_input", "datatype": "BYTES", "shape": [-1]},
                {"name": "max_tokens", "datatype": "INT32", "shape": [-1]},
            ],
            "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}],
        }
    )


def routes(e: SimEngine, own: Mapping[tuple[str, str], Handler]) -> dict[tuple[str, str], Handler]:
    """(method, path) -> handler(body): the simulator's own (stats, and the family's /metrics
    where it has one), then ``own``, the endpoints the engine's protocol brings (its ``info``)."""
    common: dict[tuple[str, str], Handler] = {
        ("GET", "/loadkit/sim/stats"): lambda b: _json(e.stats()),
    }
    if e.family in METRICS:
        common[("GET", "/metrics")] = lambda b: (
            200,
            METRICS[e.family](e.scheduler, e.model),
            "text/plain; version=0.0.4",
        )
    return {**common, **own}


def _vllm_routes(e: SimEngine) -> dict[tuple[str, str], Handler]:
    return {
        ("GET", "/v1/models"): lambda b: _models(e, "vllm"),
        ("GET", "/version"): lambda b: _json({"version": VERSIONS["openai"]}),
        ("GET", "/health"): lambda b: (200, b"", JSON),
        ("GET", "/ping"): lambda b: (200, b"", JSON),
        ("POST", "/tokenize"): lambda b: _vllm_tokenize(e, b),
        ("POST", "/detokenize"): lambda b: _detokenize(b, "prompt"),
    }


def _sglang_routes(e: SimEngine) -> dict[tuple[str, str], Handler]:
    info = {"model_path": e.model, "tokenizer_path": e.model, "is_generation": True}
    return {
        ("GET", "/v1/models"): lambda b: _models(e, "sglang"),
        ("GET", "/get_model_info"): lambda b: _json(info),
        ("GET", "/get_server_info"): lambda b: _json(
            {
                "version": VERSIONS["sglang"],
                "max_total_num_tokens": e.scheduler.pool.num_blocks * e.profile.block_size,
            }
        ),
        ("GET", "/health"): lambda b: (200, b"", JSON),
        ("GET", "/health_generate"): lambda b: (200, b"", JSON),
    }


def _tgi_routes(e: SimEngine) -> dict[tuple[str, str], Handler]:
    info = {
        "model_id": e.model,
        "model_sha": None,
        "model_dtype": "torch.float16",
        "model_device_type": "cuda",
        "max_concurrent_requests": 128,
        "max_best_of": 2,
        "max_stop_sequences": 4,
        "max_input_tokens": e.profile.max_model_len - 1,
        "max_total_tokens": e.profile.max_model_len,
        "max_batch_total_tokens": e.scheduler.pool.num_blocks * e.profile.block_size,
        "version": VERSIONS["tgi"],
        "router": "text-generation-router",
    }
    return {
        ("GET", "/info"): lambda b: _json(info),
        ("GET", "/health"): lambda b: (200, b"", JSON),
        ("POST", "/tokenize"): _tgi_tokenize,
        ("GET", "/v1/models"): lambda b: _models(e, "tgi"),
    }


def _triton_routes(e: SimEngine) -> dict[tuple[str, str], Handler]:
    meta = {
        "name": "triton",
        "version": VERSIONS["triton"],
        "extensions": [
            "classification",
            "sequence",
            "model_repository",
            "schedule_policy",
            "model_configuration",
            "system_shared_memory",
            "cuda_shared_memory",
            "binary_tensor_data",
            "parameters",
            "statistics",
            "trace",
            "logging",
        ],
    }
    return {
        ("GET", "/v2"): lambda b: _json(meta),
        ("GET", "/v2/health/ready"): lambda b: (200, b"", JSON),
        ("GET", "/v2/health/live"): lambda b: (200, b"", JSON),
        ("GET", f"/v2/models/{e.model}"): lambda b: _triton_model(e),
        ("GET", f"/v2/models/{e.model}/ready"): lambda b: (200, b"", JSON),
    }


def _llama_routes(e: SimEngine) -> dict[tuple[str, str], Handler]:
    return {
        ("GET", "/health"): lambda b: _json({"status": "ok"}),
        ("GET", "/props"): lambda b: _llama_props(e),
        ("GET", "/slots"): lambda b: _json(
            [
                {"id": i, "n_ctx": e.profile.max_model_len, "is_processing": False}
                for i in range(min(e.profile.max_num_seqs, 8))
            ]
        ),
        ("GET", "/v1/models"): lambda b: _models(e, "llamacpp"),
        ("POST", "/tokenize"): lambda b: _json({"tokens": tokenize(_body_prompt(b, ("content",)))}),
        ("POST", "/detokenize"): lambda b: _detokenize(b, "content"),
    }


def _ollama_routes(e: SimEngine) -> dict[tuple[str, str], Handler]:
    return {
        ("GET", "/"): lambda b: (200, b"Ollama is running", "text/plain; charset=utf-8"),
        ("GET", "/api/version"): lambda b: _json({"version": VERSIONS["ollama"]}),
        ("GET", "/api/tags"): lambda b: _ollama_tags(e),
        ("GET", "/api/ps"): lambda b: _json({"models": []}),
        ("GET", "/v1/models"): lambda b: _models(e, "library"),
    }


# Each built-in family's own endpoints (its SimProtocol's ``info``, loadkit.sim.builtin).
INFO: dict[str, Callable[[SimEngine], dict[tuple[str, str], Handler]]] = {
    "openai": _vllm_routes,
    "sglang": _sglang_routes,
    "tgi": _tgi_routes,
    "triton": _triton_routes,
    "llamacpp": _llama_routes,
    "ollama": _ollama_routes,
}
