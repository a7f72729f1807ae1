"""Mooncake replay: each hash id is one deterministic block of text, so equal ids are equal prefixes.

Block ``h`` is ``block_tokens`` tokens of pseudo-words seeded by (seed, h); a request's prompt is
its blocks joined by single spaces, the last block cut so the prompt has ``input_length``
tokens. Two requests that share leading hash ids therefore share a textual prefix, and the
trace's prefix sharing reaches the server for real.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import defaultdict

from loadkit.workload.text import TextBuilder

_BLOCK_KEY = 0xB10C


class BlockPrompts:
    """Builds Mooncake prompts and measures the block sharing of the text it produced."""

    def __init__(self, builder: TextBuilder, seed: int, block_tokens: int) -> None:
        self.builder = builder
        self.seed = seed
        self.block_tokens = block_tokens
        self._seen: set[bytes] = set()
        self.blocks_total = 0
        self.blocks_repeated = 0
        self._block = functools.lru_cache(maxsize=8192)(self._make_block)

    def _make_block(self, hash_id: int, n_tokens: int) -> str:
        return self.builder.text(self.seed, (_BLOCK_KEY, hash_id), n_tokens)

    def prompt(self, hash_ids: list[int], n_in: int) -> tuple[str, int]:
        """(prompt text, tokens in it) for a request of n_in tokens over these blocks."""
        n_in = min(n_in, len(hash_ids) * self.block_tokens)
        needed = max(1, math.ceil(n_in / self.block_tokens))
        texts = [self._block(h, self.block_tokens) for h in hash_ids[: needed - 1]]
        last = n_in - (needed - 1) * self.block_tokens
        texts.append(self._block(hash_ids[needed - 1], last))
        self._count_sharing(texts)
        return " ".join(texts), n_in

    def _count_sharing(self, texts: list[str]) -> None:
        """Realised sharing is measured on the text itself, not on the ids it came from."""
        for text in texts:
            digest = hashlib.blake2b(text.encode(), digest_size=12).digest()
            self.blocks_total += 1
            if digest in self._seen:
                self.blocks_repeated += 1
            else:
                self._seen.add(digest)

    def realised_ratio(self) -> float | None:
        return self.blocks_repeated / self.blocks_total if self.blocks_total else None


def group_sessions(hash_lists: list[list[int]]) -> list[list[int]]:
    """Rows grouped into sessions by their first block after the shared system block.

    Every Mooncake request starts with block 0 (a shared system prompt); requests that also
    share block 1 continue one conversation (in the FAST'25 trace 85% of consecutive pairs in
    such a group extend the earlier prompt). Groups are in order of their first row.
    """
    groups: dict[object, list[int]] = defaultdict(list)
    for row, ids in enumerate(hash_lists):
        key: object = ids[1] if len(ids) > 1 else ("solo", row)
        groups[key].append(row)
    return sorted(groups.values(), key=lambda rows: rows[0])
