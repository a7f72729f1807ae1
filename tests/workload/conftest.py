"""Fixtures for workload tests: tiny tokenizers trained locally (no hub), scenario writers."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from loadkit.workload.paths import PACKAGE_DATA


def _corpus() -> list[str]:
    """English-ish local text: the standard library's own source, plus pseudo-words."""
    from loadkit.workload.text import pseudo_words

    lines: list[str] = []
    stdlib = Path(sys.modules["os"].__file__ or "").parent
    for name in ("argparse.py", "textwrap.py", "difflib.py", "csv.py"):
        path = stdlib / name
        if path.is_file():
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    for k in range(200):
        lines.append(" ".join(pseudo_words(1, (k,), 40)))
    return lines


@pytest.fixture(scope="session")
def bpe_tokenizer_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A whitespace-pretokenised BPE with a small vocab: pseudo-words split into 1-3 tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(_corpus(), trainers.BpeTrainer(vocab_size=600, special_tokens=["[UNK]"]))
    path = tmp_path_factory.mktemp("tok") / "bpe.json"
    tok.save(str(path))
    return str(path)


@pytest.fixture(scope="session")
def bytelevel_tokenizer_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """GPT-2 style byte-level BPE: spaces belong to the next token, merges cross word starts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    path = tmp_path_factory.mktemp("tok") / "bytelevel.json"
    tok.save(str(path))
    return str(path)


@pytest.fixture
def write_scenario(tmp_path: Path) -> Callable[..., Path]:
    """Write a scenario TOML body (header added unless given) into tmp_path; returns its path."""

    def write(body: str, name: str = "s.toml", header: bool = True) -> Path:
        text = textwrap.dedent(body)
        if header:
            text = 'schema = "loadkit.scenario/1"\nname = "t"\nseed = 1\n' + text
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


# The traces shipped inside the package (loadkit/data/traces): tests that need them fail, never
# skip, when they are missing.
TRACES = PACKAGE_DATA / "traces"
