"""Reading configs and presets; every error names the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadkit.capacity import CapacityError, list_presets, load_model, model_from_config


def test_presets_present_and_loadable() -> None:
    names = list_presets()
    for expected in ("llama-2-7b", "llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mistral-7b", "deepseek-v3"):
        assert expected in names
    kinds = {n: load_model(n).attention for n in names}
    assert kinds["llama-2-7b"] == "mha" and kinds["llama-3-8b"] == "gqa" and kinds["deepseek-v3"] == "mla"


def test_config_file_and_its_folder(fixtures: Path) -> None:
    m = load_model(fixtures / "gqa_config.json")
    assert (m.layers, m.heads, m.kv_heads, m.head_dim) == (32, 32, 8, 128)
    assert m.default_weight_dtype == "bf16" and m.gated_mlp and m.attention == "gqa"


def test_config_folder(tmp_path: Path, fixtures: Path) -> None:
    (tmp_path / "config.json").write_text((fixtures / "gqa_config.json").read_text())
    assert load_model(tmp_path).kv_heads == 8


def test_missing_key_is_named_with_the_file(fixtures: Path) -> None:
    path = fixtures / "missing_heads_config.json"
    with pytest.raises(CapacityError, match=r"missing_heads_config\.json: missing key 'num_attention_heads'"):
        load_model(path)


def test_missing_file_is_not_a_preset() -> None:
    with pytest.raises(
        CapacityError, match=r"'nope\.json': no such config file and not a preset \(presets: "
    ):
        load_model("nope.json")


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"num_hidden_layers": 32,')
    with pytest.raises(CapacityError, match=r"config\.json: not valid JSON"):
        load_model(bad)


def test_wrong_types_and_shapes_are_refused() -> None:
    base = {
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "hidden_size": 64,
        "vocab_size": 10,
        "intermediate_size": 128,
    }
    with pytest.raises(CapacityError, match="'num_hidden_layers' must be a non-negative integer"):
        model_from_config({**base, "num_hidden_layers": "32"})
    with pytest.raises(CapacityError, match="num_key_value_heads=3 must divide"):
        model_from_config({**base, "num_key_value_heads": 3})
    with pytest.raises(CapacityError, match="missing key 'head_dim'"):
        model_from_config({**base, "hidden_size": 66})
    with pytest.raises(CapacityError, match="missing key 'qk_nope_head_dim'"):
        model_from_config({**base, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "v_head_dim": 16})


def test_explicit_head_dim_wins_over_hidden_over_heads() -> None:
    m = model_from_config(
        {
            "num_hidden_layers": 2,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 5120,
            "head_dim": 128,
            "vocab_size": 10,
            "intermediate_size": 1,
        }
    )
    assert m.head_dim == 128  # Mistral-Small style: not 5120 / 32 = 160


def test_gpt2_style_keys_and_plain_mlp() -> None:
    m = model_from_config(
        {
            "model_type": "gpt2",
            "n_layer": 12,
            "n_head": 12,
            "n_embd": 768,
            "n_inner": 3072,
            "vocab_size": 50257,
            "activation_function": "gelu_new",
            "tie_word_embeddings": True,
        }
    )
    assert (m.layers, m.heads, m.kv_heads, m.head_dim) == (12, 12, 12, 64)
    assert not m.gated_mlp and m.attention == "mha"


def test_multimodal_text_config_is_used() -> None:
    inner = json.loads(
        json.dumps(
            {
                "num_hidden_layers": 4,
                "num_attention_heads": 8,
                "num_key_value_heads": 1,
                "hidden_size": 512,
                "vocab_size": 100,
                "intermediate_size": 1024,
            }
        )
    )
    m = model_from_config({"model_type": "llava", "text_config": inner})
    assert m.layers == 4 and m.attention == "mqa"


def test_moe_layers_and_default_dtype_from_quantization() -> None:
    m = load_model("deepseek-v3")
    assert m.moe is not None and m.moe.moe_layers == 58 and m.moe.experts == 256
    assert m.moe.shared_intermediate_size == 2048 and m.default_weight_dtype == "fp8"
    mixtral = load_model("mixtral-8x7b")
    assert mixtral.moe is not None and mixtral.moe.moe_layers == 32 and mixtral.intermediate_size is None


def test_qwen_moe_sparse_step_and_mlp_only_layers() -> None:
    m = model_from_config(
        {
            "model_type": "qwen2_moe",
            "num_hidden_layers": 8,
            "num_attention_heads": 4,
            "hidden_size": 64,
            "vocab_size": 10,
            "intermediate_size": 256,
            "num_experts": 4,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 64,
            "decoder_sparse_step": 2,
            "mlp_only_layers": [1],
        }
    )
    assert m.moe is not None and m.moe.moe_layers == 3  # layers 3, 5, 7 (1 forced dense)
    assert m.moe.shared_intermediate_size == 64 and m.intermediate_size == 256


def test_gptq_int4_default() -> None:
    m = model_from_config(
        {
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "hidden_size": 64,
            "vocab_size": 10,
            "intermediate_size": 1,
            "quantization_config": {"quant_method": "gptq", "bits": 4},
        }
    )
    assert m.default_weight_dtype == "int4"
