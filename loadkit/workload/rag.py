"""The RAG user (``[rag]``): one iteration embeds a query, reranks N documents against it, then
chats with the top-k documents in the prompt.

An iteration is a session of three turns (``session_id`` shared, ``turn`` 1, 2, 3), sent one
after the other with no think time; a failed turn breaks it (the later turns are not sent, as
in every session). Each turn is a request of its own kind, so each lands in its own kind's rows.
The chat's prompt holds the query and the first ``top_k`` documents as drawn: the workload
does not read the rerank's answer (its order changes which documents, not how many tokens,
and the load is what is measured). Texts are keyed by the iteration's index, so the query
embedded, the query reranked and the query in the chat prompt are the same text, as are the
documents reranked and those in the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.core.kinds import EMBEDDINGS, RERANK
from loadkit.types import GenerationRequest
from loadkit.workload.distributions import Distribution
from loadkit.workload.errors import Ctx, check_keys, get_int, get_str, get_table, require
from loadkit.workload.kindparts import MAX_ITEMS, item_distribution
from loadkit.workload.sessions import TraceSession
from loadkit.workload.text import TextBuilder

RAG_KEYS = ("count", "query_tokens", "documents", "document_tokens", "top_k", "output_tokens", "label")
_QUERY = 0xFFFFFFFF  # the query's text key (item index), beside documents 0..N-1


@dataclass(slots=True)
class RagSpec:
    query_tokens: Distribution
    documents: Distribution
    document_tokens: Distribution
    top_k: int
    output_tokens: Distribution
    count: int | None = None  # iterations in all (None: until the run's end or max_requests)
    label: str = "rag"


def parse_rag(ctx: Ctx, raw: Any, base: Path) -> RagSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, RAG_KEYS)

    def dist(key: str, high: int | None = None) -> Distribution:
        return item_distribution(ctx, table, key, base, high)

    spec = RagSpec(
        query_tokens=dist("query_tokens"),
        documents=dist("documents", MAX_ITEMS),
        document_tokens=dist("document_tokens"),
        top_k=get_int(ctx.at("top_k"), require(ctx, table, "top_k"), low=1),
        output_tokens=dist("output_tokens"),
        label=get_str(ctx.at("label"), table.get("label", "rag")),
    )
    if "count" in table:
        spec.count = get_int(ctx.at("count"), table["count"], low=1)
    return spec


class RagBuilder:
    """Iteration ``j`` of a ``[rag]`` workload as a three-turn session; lengths from the
    Generator seeded by (seed, stream, j), texts from the run's text seed."""

    def __init__(
        self, spec: RagSpec, builder: TextBuilder, seed: int, text_seed: int, stream: int, shape: str
    ) -> None:
        self.spec, self.builder = spec, builder
        self.seed, self.text_seed, self.stream, self.shape = seed, text_seed, stream, shape

    def _text(self, j: int, item: int, n: int) -> tuple[str, int]:
        text = self.builder.text(self.text_seed, (self.stream, j, item), n)
        return text, n if self.builder.approximate else self.builder.last_count

    def session(self, name: str, j: int) -> TraceSession:
        spec = self.spec
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, self.stream, j])
        n_docs = spec.documents.sample_int(rng)
        doc_lengths = [spec.document_tokens.sample_int(rng) for _ in range(n_docs)]
        n_query, n_out = spec.query_tokens.sample_int(rng), spec.output_tokens.sample_int(rng)
        sid = f"{name}-rag{j}"
        label = spec.label

        def make(turn: int) -> GenerationRequest:
            query, q_tokens = self._text(j, _QUERY, n_query)
            if turn == 0:
                req = GenerationRequest(max_tokens=0, label=f"{label}/embed", kind=EMBEDDINGS, n_items=1)
                req.inputs, req.n_in_target = [query], q_tokens
            else:
                docs = [self._text(j, k, n) for k, n in enumerate(doc_lengths)]
                if turn == 1:
                    req = GenerationRequest(
                        max_tokens=0, label=f"{label}/rerank", kind=RERANK, n_items=n_docs
                    )
                    req.query, req.documents = query, [t for t, _ in docs]
                    req.top_n = min(spec.top_k, n_docs)
                    req.n_in_target = q_tokens + sum(n for _, n in docs)
                else:
                    req = self._chat(query, docs[: spec.top_k], n_out, f"{label}/chat")
            req.session_id, req.turn = sid, turn + 1
            return req

        return TraceSession(sid, make, [0.0, 0.0])

    def _chat(self, query: str, docs: list[tuple[str, int]], n_out: int, label: str) -> GenerationRequest:
        context = "\n\n".join(t for t, _ in docs)
        text = f"{context}\n\n{query}" if context else query
        # The builder's own count of what is sent (approx: words; exact: the tokenizer's).
        n_in = self.builder.count(text)
        req = GenerationRequest(max_tokens=n_out, label=label, n_in_target=n_in)
        if self.shape == "messages":
            req.messages = [{"role": "user", "content": text}]
        else:
            req.prompt = text
        return req
