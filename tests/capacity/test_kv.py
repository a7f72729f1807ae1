"""KV bytes per token against hand-computed cases."""

from __future__ import annotations

import pytest

from loadkit.capacity import kv_bytes_per_token, load_model, model_from_config, variant_table

MIB, KIB = 2**20, 2**10


def _shape(kv_heads: int) -> dict[str, object]:
    return {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": kv_heads,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "vocab_size": 32000,
    }


def test_issue_examples_mha_half_mib_and_gqa_128_kib() -> None:
    # 2 · 32 layers · 32 heads · 128 dims · 2 bytes = 524288 = 0.5 MiB
    assert kv_bytes_per_token(model_from_config(_shape(32)), "fp16") == 0.5 * MIB
    # 2 · 32 · 8 · 128 · 2 = 131072 = 128 KiB
    assert kv_bytes_per_token(model_from_config(_shape(8)), "fp16") == 128 * KIB


@pytest.mark.parametrize(
    ("dtype", "expected"), [("fp32", 256), ("bf16", 128), ("fp8", 64), ("int8", 64), ("int4", 32)]
)
def test_dtype_scales_the_gqa_size(dtype: str, expected: int) -> None:
    assert kv_bytes_per_token(model_from_config(_shape(8)), dtype) == expected * KIB


def test_same_shape_variants_side_by_side() -> None:
    m = model_from_config(_shape(8))
    assert kv_bytes_per_token(m, "fp16", "mha") == 512 * KIB
    assert kv_bytes_per_token(m, "fp16", "mqa") == 16 * KIB  # 2·32·1·128·2
    rows = {r["variant"]: r for r in variant_table(m, ["fp16", "fp8"])}
    assert list(rows) == ["mha", "gqa", "mqa"]
    assert rows["gqa"]["configured"] and not rows["mha"]["configured"]
    assert rows["gqa"]["fraction_of_mha"] == 0.25
    assert rows["mqa"]["bytes_per_token"]["fp8"] == 8 * KIB


def test_mla_stores_latent_plus_rope_key_per_layer() -> None:
    m = load_model("deepseek-v3")
    # 61 layers · (512 latent + 64 rope) · 2 bytes
    assert kv_bytes_per_token(m, "bf16") == 61 * 576 * 2 == 70272
    # the MHA it replaces: 61 · 128 heads · (192 K + 128 V) · 2
    assert kv_bytes_per_token(m, "bf16", "mha") == 61 * 128 * 320 * 2
    rows = {r["variant"]: r for r in variant_table(m, ["bf16"])}
    assert list(rows) == ["mha", "mqa", "mla"] and rows["mla"]["configured"]
    assert rows["mla"]["fraction_of_mha"] == pytest.approx(576 / (128 * 320))


def test_mla_undefined_for_a_model_without_latent() -> None:
    with pytest.raises(ValueError, match="kv_lora_rank"):
        kv_bytes_per_token(model_from_config(_shape(8)), "fp16", "mla")


def test_tensor_parallel_splits_heads_but_never_below_one() -> None:
    m = load_model("llama-3-70b")  # 80 layers, 8 KV heads of 128
    full = 80 * 8 * 256 * 2
    assert kv_bytes_per_token(m, "fp16", tp=1) == full
    assert kv_bytes_per_token(m, "fp16", tp=4) == full / 4
    assert kv_bytes_per_token(m, "fp16", tp=8) == full / 8
    assert kv_bytes_per_token(m, "fp16", tp=16) == full / 8  # one head replicated per GPU


def test_mla_latent_is_replicated_under_tp() -> None:
    m = load_model("deepseek-v3")
    assert kv_bytes_per_token(m, "fp8", tp=8) == kv_bytes_per_token(m, "fp8", tp=1) == 61 * 576
