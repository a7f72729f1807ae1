"""The request kinds of a ``[[parts]]`` entry: ``kind = "embeddings" | "rerank" | <plugin kind>``.

A chat part keeps ``input``/``output`` (parts.py). An embeddings part draws its batch size
(``inputs``) and each input's length (``input_tokens``); a rerank part a query's length, the
documents' count and each document's length, with ``top_n`` as asked. Texts come from the
same seeded text builder chat uses, keyed by the request's index and the item's, so a run is
the same on any machine and worker split. A plugin kind's keys are its ``RequestKind.keys``,
built by its ``build(table, rng)`` (the rng seeded per request like the rest).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.core.kinds import CHAT, EMBEDDINGS, RERANK, RequestKind
from loadkit.types import GenerationRequest
from loadkit.workload.distributions import Distribution, parse_distribution
from loadkit.workload.errors import Ctx, check_keys, get_int, get_str, require
from loadkit.workload.paths import resolve_path
from loadkit.workload.text import TextBuilder

COMMON_KEYS = ("name", "weight", "label", "kind")
EMBEDDINGS_KEYS = (*COMMON_KEYS, "inputs", "input_tokens")
RERANK_KEYS = (*COMMON_KEYS, "query_tokens", "documents", "document_tokens", "top_n")
MAX_ITEMS = 4096  # a batch larger than any server takes is a typo, not a workload

# Text keys: (stream, request index, item index); the query is item -1 (0xFFFF_FFFF).
_QUERY = 0xFFFFFFFF


@dataclass(slots=True)
class KindSpec:
    """What one non-chat part draws; ``plugin``: a plugin kind's table and kind."""

    kind: str
    items: Distribution | None = None  # inputs per request (embeddings), documents (rerank)
    item_tokens: Distribution | None = None
    query_tokens: Distribution | None = None
    top_n: int | None = None
    plugin: RequestKind | None = None
    table: dict[str, Any] = field(default_factory=dict)


def lookup_kind(ctx: Ctx, name: str) -> RequestKind:
    """The registered kind ``name`` (built-ins and plugins'); an error naming the known ones."""
    from loadkit.plugins import kind_registry  # the registry loads plugins: only when a part asks

    registry = kind_registry()
    if name not in registry:
        raise ctx.error(f"expected a request kind, one of {', '.join(registry)}; got {name!r}")
    return registry[name].kind


def item_distribution(
    ctx: Ctx, table: Mapping[str, Any], key: str, base: Path, high: int | None = None
) -> Distribution:
    """A count or length of a kind's request (required): a fixed value below 1, or a fixed
    count above ``high`` (no draw could give it: a typo), is refused; other families' draws
    are capped at ``high`` (docs/scenarios.md)."""
    d = parse_distribution(ctx.at(key), require(ctx, table, key), lambda c, raw: resolve_path(c, raw, base))
    if d.family == "fixed" and d.params["value"] < 1:
        raise ctx.at(key).error(f"expected at least 1, got {d.params['value']:g}")
    if high is not None:
        if d.family == "fixed" and d.params["value"] > high:
            raise ctx.at(key).error(f"expected at most {high} items per request, got {d.params['value']:g}")
        d.high = float(high) if d.high is None else min(d.high, float(high))
    return d


def parse_kind(ctx: Ctx, table: Mapping[str, Any], base: Path) -> KindSpec | None:
    """The part's kind spec; None for a chat part (its keys are parts.py's)."""
    name = get_str(ctx.at("kind"), table.get("kind", CHAT))
    if name == CHAT:
        return None
    kind = lookup_kind(ctx.at("kind"), name)

    def dist(key: str, *, high: int | None = None) -> Distribution:
        return item_distribution(ctx, table, key, base, high)

    if name == EMBEDDINGS:
        check_keys(ctx, table, EMBEDDINGS_KEYS)
        return KindSpec(name, items=dist("inputs", high=MAX_ITEMS), item_tokens=dist("input_tokens"))
    if name == RERANK:
        check_keys(ctx, table, RERANK_KEYS)
        spec = KindSpec(
            name,
            items=dist("documents", high=MAX_ITEMS),
            item_tokens=dist("document_tokens"),
            query_tokens=dist("query_tokens"),
        )
        if "top_n" in table:
            spec.top_n = get_int(ctx.at("top_n"), table["top_n"], low=1)
        return spec
    check_keys(ctx, table, (*COMMON_KEYS, *kind.keys))
    return KindSpec(name, plugin=kind, table={k: v for k, v in table.items() if k in kind.keys})


class KindBuilder:
    """Builds request ``i`` of a non-chat part: texts from ``builder`` under ``text_seed``."""

    def __init__(self, builder: TextBuilder, text_seed: int, stream: int) -> None:
        self.builder, self.text_seed, self.stream = builder, text_seed, stream

    def _text(self, i: int, item: int, n: int) -> tuple[str, int]:
        text = self.builder.text(self.text_seed, (self.stream, i, item), n)
        return text, n if self.builder.approximate else self.builder.last_count

    def build(self, spec: KindSpec, i: int, rng: np.random.Generator, label: str) -> GenerationRequest:
        if spec.plugin is not None:
            return self._plugin(spec, i, rng, label)
        assert spec.items is not None and spec.item_tokens is not None
        count = spec.items.sample_int(rng)
        lengths = [spec.item_tokens.sample_int(rng) for _ in range(count)]
        texts, total = [], 0
        for k, n in enumerate(lengths):
            text, n_real = self._text(i, k, n)
            texts.append(text)
            total += n_real
        req = GenerationRequest(max_tokens=0, label=label, kind=spec.kind, n_items=count)
        if spec.kind == EMBEDDINGS:
            req.inputs = texts
        else:
            assert spec.query_tokens is not None
            query, n_query = self._text(i, _QUERY, spec.query_tokens.sample_int(rng))
            req.query, req.documents, req.top_n = query, texts, spec.top_n
            total += n_query
        req.n_in_target = total
        return req

    def _plugin(self, spec: KindSpec, i: int, rng: np.random.Generator, label: str) -> GenerationRequest:
        """A plugin kind's request: its build function, given a stdlib Random seeded from the
        request's own numpy stream (so it is deterministic by seed and index too)."""
        assert spec.plugin is not None and spec.plugin.build is not None
        build: Callable[[Mapping[str, Any], random.Random], GenerationRequest] = spec.plugin.build
        req = build(dict(spec.table), random.Random(int(rng.integers(2**63))))
        req.kind, req.label = spec.kind, label
        return req
