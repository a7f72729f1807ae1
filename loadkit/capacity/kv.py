"""KV-cache bytes per token, per attention variant and cache dtype.

MHA / GQA / MQA store a K and a V vector per KV head per layer:
    bytes = layers · kv_heads · (k_head_dim + v_head_dim) · dtype_bytes
which is the familiar 2 · layers · kv_heads · head_dim · bytes when K and V are equally wide.
MLA (DeepSeek-V2/V3) stores one compressed latent plus the decoupled RoPE key per layer:
    bytes = layers · (kv_lora_rank + rope_head_dim) · dtype_bytes
"""

from __future__ import annotations

import math
from typing import Any

from loadkit.capacity.model import ModelSpec
from loadkit.capacity.units import dtype_bytes

VARIANTS = ("mha", "gqa", "mqa", "mla")


def kv_bytes_per_token(m: ModelSpec, dtype: str, variant: str | None = None, tp: int = 1) -> float:
    """KV bytes one token costs; with tp > 1, what it costs on each of the tp GPUs.

    Tensor parallelism splits KV heads across GPUs (a GPU holds at least one head, so heads are
    replicated when tp > kv_heads); MLA's single latent cannot be split and sits on every GPU.
    """
    variant = variant or m.attention
    b = dtype_bytes(dtype)
    if variant == "mla":
        if not m.kv_lora_rank:
            raise ValueError(f"{m.name} has no kv_lora_rank: MLA size is not defined")
        return m.layers * (m.kv_lora_rank + (m.rope_head_dim or 0)) * b
    heads = _kv_heads_for(m, variant)
    per_gpu = math.ceil(heads / tp)
    return m.layers * per_gpu * (m.head_dim + m.v_head_dim) * b


def _kv_heads_for(m: ModelSpec, variant: str) -> int:
    if variant == "mha":
        return m.heads
    if variant == "mqa":
        return 1
    if variant == "gqa":
        return m.kv_heads
    raise ValueError(f"unknown attention variant {variant!r} (known: {', '.join(VARIANTS)})")


def variants_for(m: ModelSpec) -> list[str]:
    """Variants to show side by side: MHA, the configured GQA, MQA, and MLA where configured."""
    shown = ["mha"]
    if m.attention == "gqa":
        shown.append("gqa")
    shown.append("mqa")
    if m.kv_lora_rank:
        shown.append("mla")
    return shown


def variant_table(m: ModelSpec, dtypes: list[str]) -> list[dict[str, Any]]:
    """One row per variant: bytes per token for each dtype and the ratio to MHA (same shape)."""
    rows = []
    for variant in variants_for(m):
        sizes = {d: kv_bytes_per_token(m, d, variant) for d in dtypes}
        mha = {d: kv_bytes_per_token(m, d, "mha") for d in dtypes}
        rows.append(
            {
                "variant": variant,
                "configured": variant == m.attention,
                "kv_heads": _heads_label(m, variant),
                "bytes_per_token": sizes,
                "fraction_of_mha": sizes[dtypes[0]] / mha[dtypes[0]],
            }
        )
    return rows


def _heads_label(m: ModelSpec, variant: str) -> int | None:
    return None if variant == "mla" else _kv_heads_for(m, variant)
