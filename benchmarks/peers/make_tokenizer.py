"""Write a small Hugging Face tokenizer directory for the peers' runs (no hub on this machine).

The peer tools size synthetic prompts with a tokenizer they load by name or path; with
no network, a hub name cannot load. This builds a word-level tokenizer (one token per
whitespace-separated word or punctuation mark, unknown words -> [UNK]) and saves it with
``save_pretrained``, so every tool loads it from a local path. Token counts are the tools' own
(their tokenizer), not the simulator's: the fixtures compare formats, not tokenizers.

usage: python make_tokenizer.py OUT_DIR   (run with a venv that has transformers)
"""

from __future__ import annotations

import string
import sys

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def main(out: str) -> None:
    words = ["[UNK]", "[PAD]", "[BOS]", "[EOS]", *string.ascii_lowercase, *string.punctuation]
    words += [f"w{i}" for i in range(2000)]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   bos_token="[BOS]", eos_token="[EOS]")  # fmt: skip
    fast.save_pretrained(out)
    print(f"tokenizer: {out} ({len(vocab)} tokens)")


if __name__ == "__main__":
    main(sys.argv[1])
