"""Parameter-count estimates against the counts the model publishers state."""

from __future__ import annotations

import pytest

from loadkit.capacity import count_params, load_model, model_from_config
from loadkit.capacity.params import weight_bytes

# Published totals (safetensors metadata / model cards).
PUBLISHED = {
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-7b": 7_615_616_512,
    "mixtral-8x7b": 46_702_792_704,
    "deepseek-v3": 671_000_000_000,  # 685B on the card includes the 14B MTP module, not counted
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_params_match_published(name: str) -> None:
    total = count_params(load_model(name)).total
    if name == "deepseek-v3":  # published as a rounded figure
        assert total == pytest.approx(PUBLISHED[name], rel=0.001)
    else:  # exact element counts from the released checkpoints
        assert total == PUBLISHED[name]


def test_moe_active_params() -> None:
    assert count_params(load_model("deepseek-v3")).active == pytest.approx(37e9, rel=0.02)
    assert count_params(load_model("mixtral-8x7b")).active == pytest.approx(12.9e9, rel=0.01)


def test_tied_embeddings_counted_once() -> None:
    cfg = {
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "hidden_size": 4,
        "vocab_size": 10,
        "intermediate_size": 8,
        "hidden_act": "silu",
    }
    untied, tied = (
        count_params(model_from_config(cfg)),
        count_params(model_from_config({**cfg, "tie_word_embeddings": True})),
    )
    assert untied.total - tied.total == 40
    # by hand: embed 40 + head 40 + attn 4·16 + mlp 3·4·8 + norms 2·4 + final 4
    assert untied.total == 40 + 40 + 64 + 96 + 8 + 4


def test_weight_bytes_by_dtype() -> None:
    assert weight_bytes(1000, "bf16") == 2000
    assert weight_bytes(1000, "fp8") == 1000
    assert weight_bytes(1000, "int4") == 500
