"""Parameter count estimated from a ModelSpec, and the weight memory it implies.

Counted: token embeddings, the LM head unless tied, per layer the attention projections
(GQA-aware; MLA's low-rank q/kv projections), the MLP (three matrices when gated, two when not;
MoE routed experts, shared experts and router), q/k/v biases where the family has them, and the
RMS/LayerNorm weights. Not counted: multi-token-prediction heads (DeepSeek-V3's extra 14B),
vision towers, position-embedding tables, and quantisation scales. Matches the published
counts for the presets, exact for the dense ones and Mixtral (tests/capacity/test_params.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from loadkit.capacity.model import ModelSpec
from loadkit.capacity.units import dtype_bytes


@dataclass(frozen=True, slots=True)
class ParamCount:
    total: int
    # Parameters one token goes through (MoE: only experts_per_token routed experts).
    active: int
    embeddings: int
    attention: int
    mlp: int


def count_params(m: ModelSpec) -> ParamCount:
    embed = m.vocab_size * m.hidden_size
    head = 0 if m.tie_word_embeddings else embed
    attn = m.layers * (_attention_params(m) + 2 * m.hidden_size)  # two norms per layer
    mlp_total, mlp_active = _mlp_params(m)
    fixed = embed + head + attn + m.hidden_size  # + final norm
    return ParamCount(fixed + mlp_total, fixed + mlp_active, embed + head, attn, mlp_total)


def _attention_params(m: ModelSpec) -> int:
    if m.kv_lora_rank:
        return _mla_params(m)
    h, q_width, kv_width = m.hidden_size, m.heads * m.head_dim, m.kv_heads * m.head_dim
    bias = (q_width + 2 * kv_width) if m.attention_bias else 0
    return h * q_width + 2 * h * kv_width + q_width * h + bias


def _mla_params(m: ModelSpec) -> int:
    """DeepSeek-V2/V3: q through an optional low-rank bottleneck; k/v through kv_lora_rank."""
    h, rank, rope = m.hidden_size, m.kv_lora_rank or 0, m.rope_head_dim or 0
    nope = m.head_dim - rope
    q_out = m.heads * m.head_dim
    q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * q_out) if m.q_lora_rank else h * q_out
    kv = h * (rank + rope) + rank + rank * m.heads * (nope + m.v_head_dim)
    out = m.heads * m.v_head_dim * h
    return q + kv + out


def _mlp_params(m: ModelSpec) -> tuple[int, int]:
    """(total, active) MLP parameters over all layers."""
    mats = 3 if m.gated_mlp else 2
    moe = m.moe
    dense_layers = m.layers - (moe.moe_layers if moe else 0)
    dense = dense_layers * mats * m.hidden_size * (m.intermediate_size or 0)
    if moe is None:
        return dense, dense
    expert = mats * m.hidden_size * moe.expert_intermediate_size
    shared = mats * m.hidden_size * moe.shared_intermediate_size
    router = m.hidden_size * moe.experts
    total = moe.moe_layers * (moe.experts * expert + shared + router)
    routed_active = moe.experts_per_token if moe.experts_per_token is not None else moe.experts
    active = moe.moe_layers * (routed_active * expert + shared + router)
    return dense + total, dense + active


def weight_bytes(params: int, dtype: str) -> int:
    return int(params * dtype_bytes(dtype))
