"""Embeddings and rerank on the simulator's wire: reading the requests, writing the answers.

Each family answers in its engine's own shape (loadkit/engines/kinds.py reads them): OpenAI's
``/v1/embeddings`` (``data[*].embedding``, ``usage``), Jina/Cohere-style ``/v1/rerank``
(``results[*].{index, relevance_score}``, ``usage.total_tokens``), SGLang's bare list of
``{index, score, document, meta_info}``, TEI's ``/embed`` and ``/rerank`` (bare lists, tokens in
the ``x-compute-tokens`` header), Ollama's ``/api/embed``.

A request's tokens are its items' tokens: each input embedded; for rerank each query +
document pair, as a cross-encoder reads it. The answer is built from bytes cached per vector
length: a batch of embeddings costs the simulator a join, not a float formatting per value.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from typing import Any

from loadkit.sim.textgen import tokenize
from loadkit.sim.wire.common import Outcome, RequestSpec, StreamFormat, as_int, dumps

EMBEDDINGS = "embeddings"
RERANK = "rerank"
_VECTORS = 8  # distinct vectors per dimension; item i gets vector i mod 8


@lru_cache(maxsize=8)
def vectors(dim: int) -> tuple[bytes, ...]:
    """Small deterministic unit-scale vectors as JSON arrays (bytes), one per residue."""
    out = []
    for k in range(_VECTORS):
        values = [((zlib.crc32(b"%d:%d" % (k, i)) % 2001) - 1000) / 1000.0 for i in range(dim)]
        out.append(dumps(values))
    return tuple(out)


def score(query: str, i: int) -> float:
    """A document's deterministic relevance in [0, 1)."""
    return (zlib.crc32(b"%d" % i + query[:64].encode("utf-8", "replace")) % 10_000) / 10_000


def _texts(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} must be a string or a non-empty list of strings")
    return value


def _spec(kind: str, model: str, items: list[list[int]], top_n: int | None = None) -> RequestSpec:
    ids = [t for item in items for t in item]
    return RequestSpec("", 1, False, model, exact=True, prompt_ids=ids, cache_prompt=False, kind=kind,
                       item_tokens=[len(item) for item in items], top_n=top_n)  # fmt: skip


def parse_embeddings(body: dict[str, Any], key: str, model: str) -> RequestSpec:
    """OpenAI's ``input`` (and Ollama's), TEI's ``inputs``: one string or a list of them."""
    inputs = _texts(body, key)
    return _spec(EMBEDDINGS, str(body.get("model") or model), [tokenize(text) for text in inputs])


def parse_rerank(body: dict[str, Any], docs_key: str, model: str) -> RequestSpec:
    """``query`` with ``documents`` (OpenAI-style) or ``texts`` (TEI); ``top_n`` where given."""
    query = body.get("query")
    if not isinstance(query, str):
        raise ValueError("'query' must be a string")
    documents = _texts(body, docs_key)
    top_n = as_int(body, "top_n", 0) or None
    q = tokenize(query)
    spec = _spec(RERANK, str(body.get("model") or model), [q + tokenize(doc) for doc in documents], top_n)
    spec.prompt = query  # the scores depend on it
    return spec


def openai_embeddings(body: dict[str, Any], dmax: int, model: str) -> RequestSpec:
    return parse_embeddings(body, "input", model)


def tei_embed(body: dict[str, Any], dmax: int, model: str) -> RequestSpec:
    return parse_embeddings(body, "inputs", model)


def openai_rerank(body: dict[str, Any], dmax: int, model: str) -> RequestSpec:
    return parse_rerank(body, "documents", model)


def tei_rerank(body: dict[str, Any], dmax: int, model: str) -> RequestSpec:
    return parse_rerank(body, "texts", model)


class KindFormat(StreamFormat):
    """A non-streamed kind's answer: the whole body, once its prefill is done."""

    content_type = "application/json"

    def token(self, text: bytes, index: int, n: int) -> bytes:
        raise NotImplementedError("a non-streamed kind has no token events")

    def end(self, out: Outcome) -> bytes:
        raise NotImplementedError("a non-streamed kind has no stream end")

    def items(self) -> int:
        return len(self.spec.item_tokens or ())

    def embeddings(self) -> list[bytes]:
        vecs = vectors(self.spec.embedding_dim)
        return [vecs[i % _VECTORS] for i in range(self.items())]

    def ranked(self) -> list[tuple[int, float]]:
        """(document index, score), best first, cut at top_n."""
        found = sorted(((i, score(self.spec.prompt, i)) for i in range(self.items())), key=lambda p: -p[1])
        return found[: self.spec.top_n] if self.spec.top_n else found

    def error(self, message: str) -> bytes:
        return dumps({"error": {"message": message, "type": "InternalServerError", "code": 500}})

    def malformed(self) -> bytes:
        return b'{"object":"list","data":[{"embedding":[0.1,'


class OpenAIEmbeddingsAnswer(KindFormat):
    """``/v1/embeddings`` of vLLM, SGLang, llama.cpp and TEI."""

    def body(self, text: bytes, out: Outcome) -> bytes:
        data = b",".join(b'{"object":"embedding","index":%d,"embedding":%b}' % (i, v)
                         for i, v in enumerate(self.embeddings()))  # fmt: skip
        usage = dumps(
            {"prompt_tokens": out.prompt_tokens, "total_tokens": out.prompt_tokens, "completion_tokens": 0}
        )
        head = dumps(
            {"id": "embd-" + self.rid, "object": "list", "created": self.created, "model": self.spec.model}
        )
        return head[:-1] + b',"data":[' + data + b'],"usage":' + usage + b"}"


class OpenAIRerankAnswer(KindFormat):
    """Jina/Cohere-style ``/v1/rerank`` (vLLM, llama.cpp)."""

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps({"id": "rerank-" + self.rid, "model": self.spec.model,
                      "usage": {"total_tokens": out.prompt_tokens},
                      "results": [{"index": i, "relevance_score": s} for i, s in self.ranked()]})  # fmt: skip


class SGLangRerankAnswer(KindFormat):
    """SGLang's ``/v1/rerank``: a bare list, each with its pair's prompt tokens in meta_info."""

    def body(self, text: bytes, out: Outcome) -> bytes:
        tokens = self.spec.item_tokens or []
        return dumps([{"score": s, "index": i, "meta_info": {"id": f"{self.rid}-{i}", "prompt_tokens": tokens[i]}}
                      for i, s in self.ranked()])  # fmt: skip


class TEIEmbedAnswer(KindFormat):
    """TEI's ``/embed``: a bare list of vectors; its counts and stage times in headers."""

    def body(self, text: bytes, out: Outcome) -> bytes:
        return b"[" + b",".join(self.embeddings()) + b"]"

    def body_headers(self, out: Outcome) -> dict[str, str]:
        return tei_headers(out)

    def error(self, message: str) -> bytes:
        return dumps({"error": message, "error_type": "backend"})


class TEIRerankAnswer(TEIEmbedAnswer):
    """TEI's ``/rerank``: a bare list of ``{index, score}``, every document (no top_n)."""

    def ranked(self) -> list[tuple[int, float]]:
        return sorted(((i, score(self.spec.prompt, i)) for i in range(self.items())), key=lambda p: -p[1])

    def body(self, text: bytes, out: Outcome) -> bytes:
        return dumps([{"index": i, "score": s} for i, s in self.ranked()])


def tei_headers(out: Outcome) -> dict[str, str]:
    """The headers TEI's router sets on every answer (router/src/lib.rs, ResponseMetadata)."""
    total = round(out.queue_ms + out.prefill_ms)
    return {"x-compute-type": "gpu+optimized", "x-compute-tokens": str(out.prompt_tokens),
            "x-compute-time": str(total), "x-total-time": str(total), "x-tokenization-time": "0",
            "x-queue-time": str(round(out.queue_ms)), "x-inference-time": str(round(out.prefill_ms))}  # fmt: skip


class OllamaEmbedAnswer(KindFormat):
    """Ollama's ``/api/embed``."""

    def body(self, text: bytes, out: Outcome) -> bytes:
        head = dumps({"model": self.spec.model})
        total_ns = int((out.queue_ms + out.prefill_ms) * 1e6)
        tail = dumps({"total_duration": total_ns, "load_duration": 0, "prompt_eval_count": out.prompt_tokens})
        return head[:-1] + b',"embeddings":[' + b",".join(self.embeddings()) + b"]," + tail[1:]

    def error(self, message: str) -> bytes:
        return dumps({"error": message})
