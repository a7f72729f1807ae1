"""The simulator's tokenizer and its pseudo-word output.

Tokenizer: text is split into pieces by one regular expression — an optional leading space plus
up to 6 letters, up to 3 digits, one other non-space character, or a run of whitespace — so a
token is ~4 characters of English, like a real BPE tokenizer. A piece's id is the CRC-32 of its
UTF-8 bytes modulo ``VOCAB_SIZE``: deterministic across processes and runs.

Output: each output token is one word from a fixed list of lower-case pseudo-words with a
leading space. Every word tokenizes back to exactly one piece with the same id, so an earlier
turn's answer sent back in the next prompt hits the prefix cache like real text does. Words are
ASCII letters only, so they need no JSON escaping.
"""

from __future__ import annotations

import itertools
import random
import re
import zlib

VOCAB_SIZE = 32000
_PIECE = re.compile(r" ?[A-Za-z]{1,6}| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]|\s+")

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "do")


def _make_words() -> tuple[str, ...]:
    words = [" " + a + b for a in _SYLLABLES for b in _SYLLABLES]
    words += [" " + a + b + c[0] for a in _SYLLABLES[:6] for b in _SYLLABLES for c in _SYLLABLES[:4]]
    return tuple(words)


WORDS: tuple[str, ...] = _make_words()
WORD_BYTES: tuple[bytes, ...] = tuple(w.encode() for w in WORDS)


def piece_id(piece: str) -> int:
    return zlib.crc32(piece.encode("utf-8")) % VOCAB_SIZE


WORD_IDS: tuple[int, ...] = tuple(piece_id(w) for w in WORDS)


def tokenize_pieces(text: str) -> list[str]:
    """The pieces of ``text``; joined they give back ``text`` exactly."""
    return _PIECE.findall(text)


def tokenize(text: str) -> list[int]:
    """Token ids of ``text``."""
    crc = zlib.crc32
    return [crc(p.encode("utf-8")) % VOCAB_SIZE for p in _PIECE.findall(text)]


def count_tokens(text: str) -> int:
    return len(_PIECE.findall(text))


def detokenize_ids(ids: list[int]) -> str:
    """Best-effort text for ids: output words map back, other ids become ``<id>``."""
    by_id = {i: w for i, w in zip(WORD_IDS, WORDS, strict=True)}
    return "".join(by_id.get(i, f"<{i}>") for i in ids)


class OutputCorpus:
    """One long seeded word sequence; a request's output is a window of it.

    Text for tokens ``[i, j)`` of a window is one bytes slice, so an event costs no per-token
    work, and the ids of the window are known for prefix-caching the output.
    """

    __slots__ = ("length", "words", "text", "offsets")

    def __init__(self, seed: int, length: int = 1 << 16) -> None:
        rng = random.Random(seed)
        base = rng.choices(range(len(WORDS)), k=length)
        self.length = length
        self.words = base + base  # doubled so a window never wraps
        self.offsets = [0, *itertools.accumulate(len(WORD_BYTES[w]) for w in self.words)]
        self.text = b"".join(WORD_BYTES[w] for w in self.words)

    def start_for(self, rng: random.Random) -> int:
        return rng.randrange(self.length)

    def text_of(self, start: int, i: int, n: int) -> bytes:
        """Bytes of tokens i..i+n of the window starting at ``start``."""
        a = (start + i) % self.length
        off = self.offsets
        if a + n <= len(self.words):
            return self.text[off[a] : off[a + n]]
        return b"".join(WORD_BYTES[self.words[(a + k) % self.length]] for k in range(n))

    def ids_of(self, start: int, n: int) -> list[int]:
        ids = WORD_IDS
        words, length = self.words, self.length
        return [ids[words[(start + k) % length]] for k in range(n)]
