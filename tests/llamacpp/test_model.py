"""scripts/make_tiny_model.py: deterministic, llama-loadable metadata, tokenizer agreement."""

from __future__ import annotations

import hashlib
from pathlib import Path

import gguf  # the [test] extras (scripts/test.sh installs them)
import numpy as np
import pytest
import tokenizers


def _field(reader, key):
    f = reader.fields[key]
    return f.contents()


def test_random_tensors_are_seeded(model_script):
    cfg = model_script.TinyConfig(vocab=300, hidden=32, layers=1, heads=4, kv_heads=2, ffn=64)
    a = model_script.random_tensors(cfg, 300)
    b = model_script.random_tensors(cfg, 300)
    c = model_script.random_tensors(
        model_script.TinyConfig(vocab=300, hidden=32, layers=1, heads=4, kv_heads=2, ffn=64, seed=1), 300
    )
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["blk.0.attn_q.weight"], c["blk.0.attn_q.weight"])


def test_tensor_shapes_follow_gqa_config(model_script):
    cfg = model_script.TinyConfig(vocab=300, hidden=64, layers=2, heads=8, kv_heads=2, ffn=96)
    t = model_script.random_tensors(cfg, 300)
    assert t["token_embd.weight"].shape == (300, 64)
    assert t["blk.1.attn_q.weight"].shape == (64, 64)
    assert t["blk.1.attn_k.weight"].shape == (16, 64)  # 2 kv heads x head_dim 8
    assert t["blk.1.ffn_down.weight"].shape == (64, 96)
    assert "blk.2.attn_q.weight" not in t


def test_tag_changes_with_every_shape_field(model_script):
    base = model_script.TinyConfig()
    tags = {base.tag()}
    for field, value in [
        ("vocab", 1024),
        ("hidden", 128),
        ("layers", 2),
        ("heads", 4),
        ("kv_heads", 2),
        ("ffn", 512),
        ("ctx", 1024),
        ("seed", 7),
    ]:
        tags.add(model_script.TinyConfig(**{field: value}).tag())
    assert len(tags) == 9


def test_generation_is_deterministic_and_idempotent(model_script, tmp_path: Path):
    cfg = model_script.TinyConfig(vocab=512, hidden=32, layers=1, heads=4, kv_heads=2, ffn=64, ctx=256)
    g1, t1 = model_script.make_model(tmp_path / "a", cfg)
    g2, t2 = model_script.make_model(tmp_path / "b", cfg)
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert digest(g1) == digest(g2) and digest(t1) == digest(t2)
    mtime = g1.stat().st_mtime_ns
    assert model_script.make_model(tmp_path / "a", cfg) == (g1, t1)
    assert g1.stat().st_mtime_ns == mtime  # reused, not rewritten


def test_gguf_metadata_is_what_llama_cpp_needs(tiny_model):
    r = gguf.GGUFReader(str(tiny_model.gguf))
    assert _field(r, "general.architecture") == "llama"
    assert _field(r, "tokenizer.ggml.model") == "gpt2"
    assert _field(r, "tokenizer.ggml.pre") == "gpt-2"
    assert _field(r, "llama.context_length") == 2048
    n_vocab = len(_field(r, "tokenizer.ggml.tokens"))
    embd = next(t for t in r.tensors if t.name == "token_embd.weight")
    assert int(embd.shape[1]) == n_vocab  # GGUF shape is (hidden, vocab)
    assert _field(r, "tokenizer.ggml.add_bos_token") is True
    assert "<|im_start|>" in _field(r, "tokenizer.chat_template")


def test_gguf_vocab_equals_tokenizer_json(tiny_model):
    r = gguf.GGUFReader(str(tiny_model.gguf))
    tok = tokenizers.Tokenizer.from_file(str(tiny_model.tokenizer_json))
    tokens = _field(r, "tokenizer.ggml.tokens")
    assert tokens == [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    assert _field(r, "tokenizer.ggml.bos_token_id") == tok.token_to_id("<|bos|>")
    assert _field(r, "tokenizer.ggml.eos_token_id") == tok.token_to_id("<|endoftext|>")
    types = _field(r, "tokenizer.ggml.token_type")
    assert types[tok.token_to_id("<|im_end|>")] == int(gguf.TokenType.CONTROL)
    assert types[tok.token_to_id("Ġthe")] == int(gguf.TokenType.NORMAL)


@pytest.mark.parametrize("n", [2, 3, 17, 500, 1500])
def test_prompt_of_length_is_exact_offline(tiny_model, n):
    from loadkit.testing.llamacpp import prompt_of_length

    tok = tokenizers.Tokenizer.from_file(str(tiny_model.tokenizer_json))
    text = prompt_of_length(tok, n, seed=n)
    assert len(tok.encode(text).ids) == n
    assert prompt_of_length(tok, n, seed=n) == text
    if n > 3:
        assert prompt_of_length(tok, n, seed=n + 1) != text


def test_prompt_of_length_rejects_too_short(tiny_model):
    from loadkit.testing.llamacpp import prompt_of_length

    tok = tokenizers.Tokenizer.from_file(str(tiny_model.tokenizer_json))
    with pytest.raises(ValueError):
        prompt_of_length(tok, 1)


def test_byte_decoder_is_the_byte_level_alphabet(model_script):
    table = model_script.byte_decoder()
    assert sorted(table) == sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    assert sorted(table.values()) == list(range(256))
    assert table["A"] == 65 and table["\u0120"] == 32  # "Ġ" is the space byte


def test_unprintable_ids_are_partial_utf8_and_silent_specials(model_script):
    tokens = [
        "<|bos|>",
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "a",
        "\u0120the",
        "\u00c3",
        "\u00c3\u00a9",
        "\u00a9",
    ]  # Ã = byte 0xC3 (lead), Ã© = "é", © = 0xA9
    assert model_script.unprintable_ids(tokens) == [0, 2, 6, 8]


def test_suppression_keeps_the_sentinel_out_of_every_layer(model_script):
    cfg = model_script.TinyConfig(vocab=300, hidden=32, layers=2, heads=4, kv_heads=2, ffn=64)
    t = model_script.random_tensors(cfg, 300)
    before = t["output.weight"].copy()
    model_script.suppress_unprintable(t, cfg.layers, [5, 7])
    assert np.all(t["token_embd.weight"][:, 0] == model_script.SENTINEL_VALUE)
    for i in range(cfg.layers):
        assert not t[f"blk.{i}.attn_output.weight"][0].any() and not t[f"blk.{i}.ffn_down.weight"][0].any()
    out = t["output.weight"]
    assert out[5, 0] == out[7, 0] == model_script.SUPPRESS_WEIGHT
    assert not np.delete(out[:, 0], [5, 7]).any()
    assert np.array_equal(out[:, 1:], before[:, 1:])
