"""A model's shape, read from a Hugging Face ``config.json`` or a named preset.

Only what KV-cache size and weight memory depend on is kept. Errors name the file and the
key, in one line, because a config is something the user can fix.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.units import normalise_dtype

# Older or non-Llama configs spell the same thing differently (GPT-2: n_layer, n_head, n_embd).
_KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("n_head", "n_heads"),
    "hidden_size": ("n_embd", "d_model", "dim"),
    "intermediate_size": ("n_inner", "ffn_dim", "ffn_hidden_size"),
    "num_key_value_heads": ("num_kv_heads", "n_kv_heads", "multi_query_group_num"),
}
# Activations / families whose MLP has a gate projection (three matrices instead of two).
_GATED_ACTS = ("silu", "swish", "swiglu", "geglu", "gelu_pytorch_tanh")
_GATED_TYPES = ("llama", "mistral", "mixtral", "qwen", "deepseek", "gemma", "phi3", "olmo", "internlm")


@dataclass(frozen=True, slots=True)
class MoeSpec:
    experts: int
    experts_per_token: int | None
    expert_intermediate_size: int
    # Total intermediate width of the always-on shared expert(s); 0 when there are none.
    shared_intermediate_size: int
    moe_layers: int


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    source: str
    model_type: str | None
    layers: int
    heads: int
    kv_heads: int
    # Per-head width of K and of V; equal except in MLA models (DeepSeek: 192 and 128).
    head_dim: int
    v_head_dim: int
    hidden_size: int
    vocab_size: int
    intermediate_size: int | None
    tie_word_embeddings: bool
    gated_mlp: bool
    attention_bias: bool
    kv_lora_rank: int | None
    rope_head_dim: int | None
    q_lora_rank: int | None
    moe: MoeSpec | None
    max_position_embeddings: int | None
    sliding_window: int | None
    default_weight_dtype: str

    @property
    def attention(self) -> str:
        """The attention variant as configured: 'mla', 'mqa', 'gqa' or 'mha'."""
        if self.kv_lora_rank:
            return "mla"
        if self.kv_heads == 1 and self.heads > 1:
            return "mqa"
        return "mha" if self.kv_heads == self.heads else "gqa"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["attention"] = self.attention
        return out


class _Config:
    """A config dict plus the file it came from, so every error can name both."""

    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data, self.origin = data, origin

    def find(self, key: str) -> Any:
        for name in (key, *_KEY_ALIASES.get(key, ())):
            if self.data.get(name) is not None:
                return self.data[name]
        return None

    def int_or_none(self, key: str) -> int | None:
        value = self.find(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CapacityError(f"{self.origin}: key {key!r} must be a non-negative integer, got {value!r}")
        return value

    def positive(self, key: str) -> int:
        value = self.int_or_none(key)
        if value is None:
            raise CapacityError(f"{self.origin}: missing key {key!r}")
        if value == 0:
            raise CapacityError(f"{self.origin}: key {key!r} must be positive, got 0")
        return value


def list_presets() -> list[str]:
    folder = resources.files("loadkit.capacity") / "presets"
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def load_model(ref: str | Path) -> ModelSpec:
    """A ModelSpec from a config.json path or a preset name (see list_presets())."""
    path = Path(ref)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        return model_from_config(_read_json(path), name=path.parent.name or path.stem, source=str(path))
    if str(ref) in list_presets():
        text = (resources.files("loadkit.capacity") / "presets" / f"{ref}.json").read_text("utf-8")
        return model_from_config(json.loads(text), name=str(ref), source=f"preset:{ref}")
    presets = ", ".join(list_presets())
    raise CapacityError(f"model {str(ref)!r}: no such config file and not a preset (presets: {presets})")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CapacityError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CapacityError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict):
        raise CapacityError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    return data


def model_from_config(data: dict[str, Any], name: str = "model", source: str = "<dict>") -> ModelSpec:
    """Build a ModelSpec from a parsed config dict; multimodal configs use their text_config."""
    text = data.get("text_config")
    if isinstance(text, dict) and "num_hidden_layers" not in data:
        data = {**data, **text}
    cfg = _Config(data, source)
    heads = cfg.positive("num_attention_heads")
    hidden = cfg.positive("hidden_size")
    kv_lora = cfg.int_or_none("kv_lora_rank") or None
    k_dim, v_dim = _mla_head_dims(cfg) if kv_lora else _head_dims(cfg, hidden, heads)
    layers = cfg.positive("num_hidden_layers")
    moe = _moe_spec(cfg, layers)
    return ModelSpec(
        name=str(data.get("_name") or name),
        source=source,
        model_type=data.get("model_type"),
        layers=layers,
        heads=heads,
        kv_heads=_kv_heads(cfg, heads),
        head_dim=k_dim,
        v_head_dim=v_dim,
        hidden_size=hidden,
        vocab_size=cfg.positive("vocab_size"),
        intermediate_size=_dense_intermediate(cfg, layers, moe),
        tie_word_embeddings=bool(data.get("tie_word_embeddings", False)),
        gated_mlp=_is_gated(data),
        attention_bias=bool(data.get("attention_bias") or data.get("model_type") == "qwen2"),
        kv_lora_rank=kv_lora,
        rope_head_dim=cfg.positive("qk_rope_head_dim") if kv_lora else None,
        q_lora_rank=cfg.int_or_none("q_lora_rank") or None,
        moe=moe,
        max_position_embeddings=cfg.int_or_none("max_position_embeddings"),
        sliding_window=cfg.int_or_none("sliding_window") if data.get("use_sliding_window", True) else None,
        default_weight_dtype=_default_weight_dtype(data),
    )


def _kv_heads(cfg: _Config, heads: int) -> int:
    if cfg.data.get("multi_query") is True:  # Falcon-7B style flag
        return 1
    kv = cfg.int_or_none("num_key_value_heads") or heads
    if kv > heads or heads % kv:
        raise CapacityError(f"{cfg.origin}: num_key_value_heads={kv} must divide num_attention_heads={heads}")
    return kv


def _head_dims(cfg: _Config, hidden: int, heads: int) -> tuple[int, int]:
    explicit = cfg.int_or_none("head_dim")
    if explicit:
        return explicit, explicit
    if hidden % heads:
        raise CapacityError(f"{cfg.origin}: missing key 'head_dim' (hidden_size {hidden} / {heads} heads)")
    return hidden // heads, hidden // heads


def _mla_head_dims(cfg: _Config) -> tuple[int, int]:
    """K is nope+rope wide, V is v_head_dim wide: the MHA this MLA replaces (for comparison)."""
    rope = cfg.positive("qk_rope_head_dim")
    nope = cfg.int_or_none("qk_nope_head_dim")
    v_dim = cfg.int_or_none("v_head_dim")
    if nope is None or v_dim is None:
        missing = "qk_nope_head_dim" if nope is None else "v_head_dim"
        raise CapacityError(f"{cfg.origin}: missing key {missing!r} (needed with kv_lora_rank)")
    return nope + rope, v_dim


def _moe_spec(cfg: _Config, layers: int) -> MoeSpec | None:
    experts = next((v for k in _EXPERT_KEYS if (v := cfg.int_or_none(k))), None)
    if not experts:
        return None
    width = cfg.int_or_none("moe_intermediate_size") or cfg.positive("intermediate_size")
    shared = (cfg.int_or_none("n_shared_experts") or 0) * width
    shared += cfg.int_or_none("shared_expert_intermediate_size") or 0
    moe_layers = sum(1 for i in range(layers) if _is_moe_layer(cfg.data, i))
    return MoeSpec(experts, cfg.int_or_none("num_experts_per_tok"), width, shared, moe_layers)


_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")


def _is_moe_layer(data: dict[str, Any], i: int) -> bool:
    """DeepSeek: dense first k layers, then every moe_layer_freq-th; Qwen-MoE: decoder_sparse_step."""
    if "first_k_dense_replace" in data or "moe_layer_freq" in data:
        first = data.get("first_k_dense_replace") or 0
        return i >= first and i % (data.get("moe_layer_freq") or 1) == 0
    if i in (data.get("mlp_only_layers") or []):
        return False
    return (i + 1) % (data.get("decoder_sparse_step") or 1) == 0


def _dense_intermediate(cfg: _Config, layers: int, moe: MoeSpec | None) -> int | None:
    if moe is not None and moe.moe_layers == layers:
        return None  # no dense MLP anywhere (Mixtral): intermediate_size is the expert width
    return cfg.positive("intermediate_size")


def _is_gated(data: dict[str, Any]) -> bool:
    act = str(data.get("hidden_act") or data.get("hidden_activation") or "").lower()
    kind = str(data.get("model_type") or "").lower()
    return any(a in act for a in _GATED_ACTS) or any(kind.startswith(t) for t in _GATED_TYPES)


def _default_weight_dtype(data: dict[str, Any]) -> str:
    """The dtype the checkpoint ships in: quantization_config first, then torch_dtype, else bf16."""
    quant = data.get("quantization_config") or {}
    if isinstance(quant, dict):
        if "fp8" in str(quant.get("quant_method", "")).lower():
            return "fp8"
        if quant.get("bits") in (4, 8):
            return "int4" if quant["bits"] == 4 else "int8"
    dtype = data.get("torch_dtype") or data.get("dtype")
    try:
        return normalise_dtype(str(dtype)) if dtype else "bf16"
    except CapacityError:
        return "bf16"
