"""plan(): model + length distribution + GPU -> one JSON-able capacity plan (loadkit.capacity/1)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.kv import kv_bytes_per_token, variant_table
from loadkit.capacity.lengths import LengthSample, from_list, read_lengths
from loadkit.capacity.model import ModelSpec, load_model, model_from_config
from loadkit.capacity.paging import choose_block_sizes, fit_row, paging_row
from loadkit.capacity.params import count_params, weight_bytes
from loadkit.capacity.units import normalise_dtype, parse_memory

SCHEMA = "loadkit.capacity/1"
DEFAULT_KV_DTYPES = ("fp16", "fp8")
DEFAULT_BLOCK_SIZES = (8, 16, 32, 64, 128)
DEFAULT_GPU_MEMORY = 80 * 2**30
DEFAULT_GPU_UTIL = 0.9  # vLLM's default gpu_memory_utilization

ASSUMPTIONS = (
    "Sequences are counted at their final length (prompt + output): the most each ever holds.",
    "max_seqs = floor(num_blocks / mean blocks per sequence) at this workload's lengths; "
    "max_seqs_p99 sizes every sequence at the p99 length.",
    "KV budget per GPU = gpu_memory x gpu_util - weights / tp - reserve; activations, CUDA graphs "
    "and the engine's own buffers come out of --reserve (0 unless given).",
    "Tensor parallelism splits KV heads across GPUs (at least one head per GPU); an MLA latent "
    "is replicated on every GPU.",
    "Parameters estimated from the config: embeddings, LM head unless tied, attention (GQA/MLA), "
    "gated or plain MLP, MoE experts + shared experts + router, norms; no MTP heads or vision towers.",
    "int4 and fp8 sizes leave out quantisation scales (about 3% for int4 at group size 128).",
    "Sliding-window attention is not applied: every token of a sequence is cached.",
)


def plan(
    model: ModelSpec | str | Path | dict[str, Any],
    lengths: LengthSample | Sequence[int] | np.ndarray | str | Path | None = None,
    *,
    kv_dtypes: Sequence[str] = DEFAULT_KV_DTYPES,
    block_sizes: Sequence[int] = DEFAULT_BLOCK_SIZES,
    gpu_memory: int | str | None = DEFAULT_GPU_MEMORY,
    gpu_util: float = DEFAULT_GPU_UTIL,
    tp: int = 1,
    weight_dtype: str | None = None,
    reserve: int | str = 0,
    max_fragmentation: float = 0.05,
) -> dict[str, Any]:
    """The capacity plan as a JSON-able dict; gpu_memory=None leaves out the fit section."""
    spec = _as_model(model)
    sample = _as_lengths(lengths)
    dtypes = [normalise_dtype(d) for d in kv_dtypes]
    sizes = _check_block_sizes(block_sizes)
    _check_parallel(tp, gpu_util)
    wdtype = normalise_dtype(weight_dtype) if weight_dtype else spec.default_weight_dtype
    weights = _weights(spec, wdtype, tp)
    out: dict[str, Any] = {"schema": SCHEMA, "model": spec.to_json(), "weights": weights}
    out["kv_per_token"] = {"dtypes": dtypes, "variants": variant_table(spec, dtypes)}
    out["lengths"] = sample.summary() if sample else None
    out["paging"] = _paging(sample, sizes, max_fragmentation)
    out["prefix_sharing"] = _prefix(sample, spec, dtypes)
    out["fit"] = _fit(spec, sample, dtypes, sizes, gpu_memory, gpu_util, tp, weights, reserve)
    out["assumptions"] = list(ASSUMPTIONS)
    out["warnings"] = _warnings(spec, sample, out["fit"], tp)
    return out


def _as_model(model: ModelSpec | str | Path | dict[str, Any]) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, dict):
        return model_from_config(model)
    return load_model(model)


def _as_lengths(lengths: Any) -> LengthSample | None:
    if lengths is None or isinstance(lengths, LengthSample):
        return lengths
    if isinstance(lengths, str | Path):
        return read_lengths(lengths)
    return from_list(lengths)


def _check_block_sizes(block_sizes: Sequence[int]) -> list[int]:
    sizes = sorted(set(int(b) for b in block_sizes))
    if not sizes or sizes[0] <= 0:
        raise CapacityError(f"block sizes must be positive integers, got {list(block_sizes)}")
    return sizes


def _check_parallel(tp: int, gpu_util: float) -> None:
    if tp < 1:
        raise CapacityError(f"--tp must be at least 1, got {tp}")
    if not 0 < gpu_util <= 1:
        raise CapacityError(f"--gpu-util must be in (0, 1], got {gpu_util}")


def _weights(spec: ModelSpec, dtype: str, tp: int) -> dict[str, Any]:
    pc = count_params(spec)
    total = weight_bytes(pc.total, dtype)
    return {
        "dtype": dtype,
        "params": pc.total,
        "active_params": pc.active,
        "embedding_params": pc.embeddings,
        "attention_params": pc.attention,
        "mlp_params": pc.mlp,
        "bytes": total,
        "bytes_per_gpu": total / tp,
    }


def _paging(sample: LengthSample | None, sizes: list[int], limit: float) -> dict[str, Any] | None:
    if sample is None or sample.lengths.size == 0:
        return None
    rows = [paging_row(sample.lengths, b) for b in sizes]
    return {"rows": rows, "recommended": choose_block_sizes(rows, limit)}


def _prefix(sample: LengthSample | None, spec: ModelSpec, dtypes: list[str]) -> dict[str, Any] | None:
    if sample is None or sample.prefix is None:
        return None
    out = sample.prefix.to_json()
    shared = sample.prefix.shared_tokens
    out["saved_bytes"] = {d: shared * kv_bytes_per_token(spec, d) for d in dtypes}
    return out


def _fit(
    spec: ModelSpec,
    sample: LengthSample | None,
    dtypes: list[str],
    sizes: list[int],
    gpu_memory: int | str | None,
    gpu_util: float,
    tp: int,
    weights: dict[str, Any],
    reserve: int | str,
) -> dict[str, Any] | None:
    if gpu_memory is None:
        return None
    memory = parse_memory(gpu_memory) if isinstance(gpu_memory, str) else int(gpu_memory)
    reserve_bytes = parse_memory(reserve) if isinstance(reserve, str) else int(reserve)
    budget = memory * gpu_util - weights["bytes_per_gpu"] - reserve_bytes
    lengths = sample.lengths if sample is not None else None
    shared = _shared_fraction(sample)
    rows = []
    for d in dtypes:
        per_token = kv_bytes_per_token(spec, d, tp=tp)
        for b in sizes:
            row = {"kv_dtype": d, "kv_bytes_per_token_per_gpu": per_token}
            row.update(fit_row(per_token, b, budget, lengths, shared))
            rows.append(row)
    return {
        "gpu_memory_bytes": memory,
        "gpu_util": gpu_util,
        "tp": tp,
        "reserve_bytes": reserve_bytes,
        "weights_bytes_per_gpu": weights["bytes_per_gpu"],
        "kv_budget_bytes_per_gpu": budget,
        "rows": rows,
    }


def _shared_fraction(sample: LengthSample | None) -> float | None:
    if sample is None or sample.prefix is None:
        return None
    value = sample.prefix.to_json()["saved_fraction_of_kv"]
    return float(value) if value is not None else None


def _warnings(spec: ModelSpec, sample: LengthSample | None, fit: dict[str, Any] | None, tp: int) -> list[str]:
    out: list[str] = []
    if fit is not None and fit["kv_budget_bytes_per_gpu"] <= 0:
        out.append(
            "weights do not fit: no memory is left for the KV cache (try --tp or a smaller --weight-dtype)"
        )
    if spec.attention in ("gqa", "mha") and spec.kv_heads % tp and tp % spec.kv_heads:
        out.append(f"tp={tp} does not divide kv_heads={spec.kv_heads}: engines refuse this split")
    if (
        spec.sliding_window
        and spec.max_position_embeddings
        and spec.sliding_window < spec.max_position_embeddings
    ):
        out.append(
            f"config has sliding_window={spec.sliding_window}: engines that honour it cache less per long sequence"
        )
    if sample is not None:
        out.extend(_length_warnings(spec, sample))
    return out


def _length_warnings(spec: ModelSpec, sample: LengthSample) -> list[str]:
    out = []
    if sample.lengths.size == 0:
        out.append(f"{sample.source}: no usable lengths")
    if sample.skipped:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(sample.skipped.items()))
        out.append(f"{sample.source}: lines not used ({detail})")
    limit = spec.max_position_embeddings
    if limit and sample.lengths.size and (over := int((sample.lengths > limit).sum())):
        out.append(f"{over} sequences are longer than the model's context ({limit} tokens)")
    return out
