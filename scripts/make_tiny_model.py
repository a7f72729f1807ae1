#!/usr/bin/env python3
"""Make a tiny random-weight Llama model as GGUF, with a BPE tokenizer trained locally.

Nothing is downloaded. The tokenizer is a byte-level BPE (GPT-2 style) trained with the
`tokenizers` library on Python's own standard library sources, which every machine with
Python has. It is saved twice: inside the GGUF (so llama.cpp tokenizes) and as a
`tokenizer.json` next to it (so tests can build prompts of an exact token length offline).
Both use the GPT-2 pre-tokenizer regex and the same merges, so their token ids agree.

Weights are seeded normal noise: text quality is irrelevant, but tokenization, prefill and
decode are real work on the llama.cpp side, so timings are measurable.

Usage: python scripts/make_tiny_model.py [--out DIR] [--seed N] [--force]
Prints the path of the .gguf on the last stdout line. Re-running with the same settings
reuses the existing files (idempotent).

Requires: numpy, tokenizers, gguf (all in loadkit's `test` extra).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Bump when the recipe changes so caches built by an older recipe are not reused.
RECIPE_VERSION = 2
BOS, EOS, IM_START, IM_END = "<|bos|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [BOS, EOS, IM_START, IM_END]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS_BYTES = 2_000_000
# Output suppression (see suppress_unprintable): hidden dim 0 of the residual stream carries a
# constant that no layer writes to, and unprintable tokens get a large negative weight on it.
SENTINEL_DIM = 0
SENTINEL_VALUE = 0.2
SUPPRESS_WEIGHT = -5.0
# Control tokens that would stream as empty text; EOS and <|im_end|> stay: they are the
# model's natural stops, and `ignore_eos` masks them when exact lengths are wanted.
NEVER_EMIT = (BOS, IM_START)


@dataclass(frozen=True)
class TinyConfig:
    """Shape of the model. Defaults keep a 500-token prefill in the tens of ms on 2 cores."""

    vocab: int = 4096
    hidden: int = 256
    layers: int = 4
    heads: int = 8
    kv_heads: int = 4
    ffn: int = 768
    ctx: int = 2048
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def tag(self) -> str:
        """File-name tag: every field that changes the bytes of the model is in it."""
        return (
            f"r{RECIPE_VERSION}-v{self.vocab}-h{self.hidden}-l{self.layers}-a{self.heads}"
            f"-kv{self.kv_heads}-f{self.ffn}-c{self.ctx}-s{self.seed}"
        )


def default_out_dir() -> Path:
    cache = os.environ.get("LOADKIT_CACHE") or str(Path.home() / ".cache" / "loadkit")
    return Path(cache) / "models"


def model_paths(out_dir: Path, cfg: TinyConfig) -> tuple[Path, Path]:
    """(gguf path, tokenizer.json path) for a config."""
    stem = f"tiny-llama-{cfg.tag()}"
    return out_dir / f"{stem}.gguf", out_dir / f"{stem}.tokenizer.json"


def corpus_files() -> list[Path]:
    """Top-level stdlib modules, sorted so the corpus is the same on every run."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(stdlib.glob("*.py"))


def read_corpus(limit: int = CORPUS_BYTES) -> list[str]:
    texts: list[str] = []
    total = 0
    for path in corpus_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= limit:
            break
    if not texts:
        raise SystemExit("make_tiny_model: no Python stdlib sources found to train a tokenizer on")
    return texts


def train_tokenizer(texts: list[str], vocab: int):  # -> tokenizers.Tokenizer
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    # use_regex=True is the GPT-2 split that llama.cpp applies for tokenizer.ggml.pre "gpt-2".
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # llama.cpp prepends BOS (tokenizer.ggml.add_bos_token); mirror it so counts agree.
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    return tok


def vocab_lists(tok) -> tuple[list[str], list[int], list[str]]:
    """Tokens in id order, their GGUF token types, and merges as 'left right' strings."""
    import json

    from gguf import TokenType

    vocab = tok.get_vocab(with_added_tokens=True)
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise SystemExit("make_tiny_model: tokenizer ids are not contiguous")
    tokens = [t for t, _ in by_id]
    types = [int(TokenType.CONTROL if t in SPECIAL_TOKENS else TokenType.NORMAL) for t in tokens]
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    return tokens, types, merges


def byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level alphabet, char -> byte: printable bytes map to themselves, the rest
    to U+0100 onwards in byte order."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + i): b for i, b in enumerate(others)})
    return table


def unprintable_ids(tokens: list[str]) -> list[int]:
    """Ids the model must never generate: tokens whose bytes are not complete UTF-8 on their
    own (llama-server holds such a token back and sends it merged with the next, or drops it
    at the end of the stream, so events would stop matching tokens), and NEVER_EMIT."""
    table = byte_decoder()
    bad = []
    for tid, tok in enumerate(tokens):
        if tok in SPECIAL_TOKENS:
            if tok in NEVER_EMIT:
                bad.append(tid)
            continue
        try:
            bytes(table[c] for c in tok).decode("utf-8")
        except UnicodeDecodeError:
            bad.append(tid)
    return bad


def suppress_unprintable(tensors: dict[str, np.ndarray], layers: int, bad_ids: list[int]) -> None:
    """Make `bad_ids` unreachable by sampling, whatever the random weights do.

    The embedding puts SENTINEL_VALUE in dim 0 and no layer writes to it, so after the final
    RMS norm that component is large and positive for every position; a weight of
    SUPPRESS_WEIGHT on it lowers those logits by roughly 30-40 nats, and the other
    tokens' weight on it is 0 so their logits are unchanged.
    """
    tensors["token_embd.weight"][:, SENTINEL_DIM] = SENTINEL_VALUE
    for i in range(layers):
        tensors[f"blk.{i}.attn_output.weight"][SENTINEL_DIM, :] = 0.0
        tensors[f"blk.{i}.ffn_down.weight"][SENTINEL_DIM, :] = 0.0
    out = tensors["output.weight"]
    out[:, SENTINEL_DIM] = 0.0
    out[bad_ids, SENTINEL_DIM] = SUPPRESS_WEIGHT


def random_tensors(cfg: TinyConfig, n_vocab: int) -> dict[str, np.ndarray]:
    """Seeded weights, numpy shape (out_features, in_features) as GGUF expects."""
    rng = np.random.default_rng(cfg.seed)
    h, f, q, kv = cfg.hidden, cfg.ffn, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)

    tensors = {"token_embd.weight": mat(n_vocab, h)}
    for i in range(cfg.layers):
        p = f"blk.{i}."
        tensors[p + "attn_norm.weight"] = np.ones(h, dtype=np.float32)
        tensors[p + "attn_q.weight"] = mat(q, h)
        tensors[p + "attn_k.weight"] = mat(kv, h)
        tensors[p + "attn_v.weight"] = mat(kv, h)
        tensors[p + "attn_output.weight"] = mat(h, q)
        tensors[p + "ffn_norm.weight"] = np.ones(h, dtype=np.float32)
        tensors[p + "ffn_gate.weight"] = mat(f, h)
        tensors[p + "ffn_up.weight"] = mat(f, h)
        tensors[p + "ffn_down.weight"] = mat(h, f)
    tensors["output_norm.weight"] = np.ones(h, dtype=np.float32)
    tensors["output.weight"] = mat(n_vocab, h)
    return tensors


def add_model_metadata(w, cfg: TinyConfig, corpus_sha: str) -> None:
    from gguf import LlamaFileType

    w.add_name("tiny")
    w.add_description(f"loadkit tiny random-weight test model {cfg.tag()}; corpus sha256 {corpus_sha}")
    w.add_file_type(LlamaFileType.ALL_F32)
    w.add_context_length(cfg.ctx)
    w.add_embedding_length(cfg.hidden)
    w.add_block_count(cfg.layers)
    w.add_feed_forward_length(cfg.ffn)
    w.add_head_count(cfg.heads)
    w.add_head_count_kv(cfg.kv_heads)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)


def add_tokenizer_metadata(w, tok) -> None:
    tokens, types, merges = vocab_lists(tok)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tok.token_to_id(BOS))
    w.add_eos_token_id(tok.token_to_id(EOS))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)


def write_gguf(path: Path, cfg: TinyConfig, tok, corpus_sha: str) -> None:
    from gguf import GGUFWriter

    # A unique temp name: two test processes may generate the same model at once.
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, suffix=".gguf.tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    w = GGUFWriter(str(tmp), "llama")
    add_model_metadata(w, cfg, corpus_sha)
    add_tokenizer_metadata(w, tok)
    tokens = vocab_lists(tok)[0]
    tensors = random_tensors(cfg, len(tokens))
    suppress_unprintable(tensors, cfg.layers, unprintable_ids(tokens))
    for name, data in tensors.items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.chmod(0o644)
    tmp.replace(path)  # atomic: a concurrent reader never sees a half-written model


def make_model(out_dir: Path, cfg: TinyConfig, force: bool = False) -> tuple[Path, Path]:
    """Create (or reuse) the model and tokenizer.json; return their paths."""
    gguf_path, tok_path = model_paths(out_dir, cfg)
    if gguf_path.exists() and tok_path.exists() and not force:
        return gguf_path, tok_path
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = read_corpus()
    corpus_sha = hashlib.sha256("".join(texts).encode()).hexdigest()[:16]
    tok = train_tokenizer(texts, cfg.vocab)
    with tempfile.NamedTemporaryFile("w", dir=out_dir, suffix=".json", delete=False) as fh:
        fh.write(tok.to_str())
    os.chmod(fh.name, 0o644)  # NamedTemporaryFile creates 0600; others share this cache
    # Tokenizer first: a present .gguf then always has its tokenizer.json beside it.
    Path(fh.name).replace(tok_path)
    write_gguf(gguf_path, cfg, tok, corpus_sha)
    return gguf_path, tok_path


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, TinyConfig]:
    d = TinyConfig()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="output dir (default $LOADKIT_CACHE/models)")
    p.add_argument("--force", action="store_true", help="rebuild even if the files exist")
    for field in ("vocab", "hidden", "layers", "heads", "kv_heads", "ffn", "ctx", "seed"):
        p.add_argument(f"--{field.replace('_', '-')}", type=int, default=getattr(d, field))
    ns = p.parse_args(argv)
    cfg = TinyConfig(ns.vocab, ns.hidden, ns.layers, ns.heads, ns.kv_heads, ns.ffn, ns.ctx, ns.seed)
    if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads:
        p.error("hidden must be divisible by heads, and heads by kv-heads")
    return ns, cfg


def main(argv: list[str] | None = None) -> int:
    ns, cfg = parse_args(sys.argv[1:] if argv is None else argv)
    gguf_path, tok_path = make_model(ns.out or default_out_dir(), cfg, force=ns.force)
    print(f"tokenizer: {tok_path}", file=sys.stderr)
    print(gguf_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
