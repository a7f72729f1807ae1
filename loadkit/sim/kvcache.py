"""Paged KV cache with a prefix cache, counted in blocks (no block contents are simulated).

A full block is identified by the hash of all tokens up to and including it (a chain hash:
``h_i = hash((h_{i-1}, tokens of block i))``), as vLLM's automatic prefix caching does, so two
prompts share block ``i`` only when they agree on every token before its end. Cached blocks
are reference-counted; blocks nobody uses stay cached in LRU order and are evicted only when
a new block is needed and no never-used block is left.
"""

from __future__ import annotations

from collections import OrderedDict

_ROOT_HASH = 0x9E3779B9


def block_hashes(tokens: list[int], block_size: int, start: int = 0, prev: int | None = None) -> list[int]:
    """Chain hashes of the full blocks of ``tokens``, from block index ``start`` on.

    ``prev`` is the hash of block ``start - 1`` (None at the beginning).
    """
    out: list[int] = []
    h = _ROOT_HASH if prev is None else prev
    for i in range(start * block_size, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[i : i + block_size])))
        out.append(h)
    return out


class BlockPool:
    """Counts of free, private and cached blocks, plus the prefix-cache index."""

    __slots__ = ("num_blocks", "block_size", "caching", "n_free", "refs", "lru", "hits", "queries")

    def __init__(self, num_blocks: int, block_size: int, caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.caching = caching
        self.n_free = num_blocks  # neither held by a sequence nor cached
        self.refs: dict[int, int] = {}  # cached block hash -> sequences holding it
        self.lru: OrderedDict[int, None] = OrderedDict()  # cached blocks nobody holds
        self.hits = 0  # prompt tokens found in the cache (for the hit-rate metric)
        self.queries = 0  # prompt tokens looked up

    def available(self) -> int:
        """Blocks a sequence could get now (free ones plus evictable cached ones)."""
        return self.n_free + len(self.lru)

    def used(self) -> int:
        """Blocks held by running sequences."""
        return self.num_blocks - self.available()

    def usage(self) -> float:
        return self.used() / self.num_blocks

    def match_prefix(self, hashes: list[int], max_blocks: int) -> int:
        """How many leading blocks of ``hashes`` (at most max_blocks) are cached."""
        if not self.caching:
            return 0
        n = 0
        refs = self.refs
        # A sequence that reuses nothing (llama.cpp's cache_prompt=false, embeddings) has no
        # hashes at all, whatever its length.
        max_blocks = min(max_blocks, len(hashes))
        while n < max_blocks and hashes[n] in refs:
            n += 1
        return n

    def acquire_cached(self, hashes: list[int]) -> None:
        """Take a reference on cached blocks (they leave the LRU while held)."""
        for h in hashes:
            if self.refs[h] == 0:
                del self.lru[h]
            self.refs[h] += 1

    def allocate(self, n: int) -> bool:
        """Take n private blocks, evicting unused cached ones if needed; False if impossible."""
        if n > self.available():
            return False
        while self.n_free < n:
            h, _ = self.lru.popitem(last=False)
            del self.refs[h]
            self.n_free += 1
        self.n_free -= n
        return True

    def register(self, hashes: list[int]) -> list[int]:
        """Turn private full blocks into cached ones; returns the hashes now held.

        When another sequence cached the same block meanwhile, the private copy is freed and
        the shared one is held instead — the caller keeps one reference either way.
        """
        if not self.caching:
            return []
        for h in hashes:
            count = self.refs.get(h)
            if count is None:
                self.refs[h] = 1
                continue
            if count == 0:
                del self.lru[h]
            self.refs[h] = count + 1
            self.n_free += 1
        return hashes

    def release(self, cached: list[int], private: int) -> None:
        """Give back a sequence's blocks: private ones become free, cached ones evictable."""
        self.n_free += private
        refs, lru = self.refs, self.lru
        for h in reversed(cached):  # the tail of a prompt is evicted before its head
            count = refs[h] - 1
            refs[h] = count
            if count == 0:
                lru[h] = None

    def record_lookup(self, queried: int, hit: int) -> None:
        self.queries += queried
        self.hits += hit
