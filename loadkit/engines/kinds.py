"""The built-in engines' non-streamed kinds: embeddings and rerank, each as the engine takes it.

A ``KindWire`` is one kind on one engine's API: its path, the JSON body built from the
engine-neutral request, and the parser of the whole answer (``loadkit.core.kinds.BodyParser``).
Four answer shapes cover the built-in engines (docs/engines.md, "Which engine serves what"):

- OpenAI ``/v1/embeddings`` (vLLM, SGLang, llama.cpp, TEI): ``data[*].embedding``, ``usage.prompt_tokens``;
- Jina/Cohere-style ``/v1/rerank`` (vLLM, llama.cpp with ``--reranking``): ``results[*].{index,
  relevance_score}``, ``usage.total_tokens``; SGLang's ``/v1/rerank`` answers a bare list of
  ``{index, score}`` instead;
- TEI's ``/embed`` (a bare list of vectors) and ``/rerank`` (a bare list of ``{index, score}``),
  whose token count is the ``x-compute-tokens`` response header;
- Ollama's ``/api/embed``: ``embeddings`` and ``prompt_eval_count``.

The answers are counted, never kept: a vector's floats are not read past its type check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from loadkit.core.adapter import EngineAdapter
from loadkit.core.kinds import EMBEDDINGS, RERANK, BodyParser, BodyResult
from loadkit.engines.common import int_or_none
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, Usage

BodyBuilder = Callable[[EngineAdapter, GenerationRequest], dict[str, Any]]


def load_answer(body: bytes, what: str) -> Any:
    """The answer's JSON, or MalformedEvent naming the kind and what was wrong."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedEvent(f"{what} answer is not JSON: {exc}: {body[:120]!r}") from None


def error_of(obj: Any) -> str | None:
    """An error object inside a 200 answer (OpenAI's ``{"error": {...}}``, TEI's and Ollama's
    ``{"error": "..."}``, vLLM's ``{"object": "error", "message": ...}``)."""
    if isinstance(obj, dict) and obj.get("object") == "error":  # vLLM's ErrorResponse
        return str(obj.get("message") or obj)
    if not isinstance(obj, dict) or obj.get("error") is None:
        return None
    err = obj["error"]
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err)


def _list_field(obj: Any, key: str, what: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise MalformedEvent(f"{what} answer is not a JSON object: {str(obj)[:120]!r}")
    value = obj.get(key)
    if not isinstance(value, list):
        raise MalformedEvent(f"{what} answer has no {key!r} list: {str(obj)[:120]!r}")
    return value


def _vectors(items: list[Any], what: str, key: str | None = None) -> int:
    """How many embeddings ``items`` holds: each a list of numbers (``key``: inside an object)."""
    for i, item in enumerate(items):
        vec = item.get(key) if key is not None and isinstance(item, dict) else item
        if not isinstance(vec, list) or (vec and not isinstance(vec[0], int | float)):
            where = f"{key!r} of item {i}" if key else f"item {i}"
            raise MalformedEvent(f"{what}: {where} is not a vector of numbers: {str(item)[:120]!r}")
    return len(items)


def _scores(items: list[Any], what: str, score: str) -> int:
    """How many scored documents ``items`` holds: each an object with an index and ``score``."""
    for i, item in enumerate(items):
        if not (isinstance(item, dict) and isinstance(item.get("index"), int)
                and isinstance(item.get(score), int | float)):  # fmt: skip
            raise MalformedEvent(f"{what}: result {i} needs an integer 'index' and a numeric {score!r}: "
                                 f"{str(item)[:120]!r}")  # fmt: skip
    return len(items)


def _usage(obj: Any) -> Usage | None:
    """``usage.prompt_tokens``, or ``usage.total_tokens`` where the server sends only that (rerank)."""
    raw = obj.get("usage") if isinstance(obj, dict) else None
    if not isinstance(raw, dict):
        return None
    tokens = int_or_none(raw.get("prompt_tokens"))
    if tokens is None:
        tokens = int_or_none(raw.get("total_tokens"))
    return Usage(prompt_tokens=tokens) if tokens is not None else None


def _header_tokens(headers: Mapping[str, str]) -> Usage | None:
    """TEI's ``x-compute-tokens`` header: the tokens it computed for the request."""
    value = headers.get("x-compute-tokens")
    return Usage(prompt_tokens=int(value)) if value is not None and value.isdigit() else None


def _tei_timings(headers: Mapping[str, str]) -> dict[str, Any] | None:
    """TEI's stage times (ms) from its response headers, where it sent them."""
    found = {
        name: int(headers[f"x-{name}-time"])
        for name in ("tokenization", "queue", "inference")
        if headers.get(f"x-{name}-time", "").isdigit()
    }
    return found or None


class OpenAIEmbeddingsParser(BodyParser):
    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        obj = load_answer(body, "embeddings")
        err = error_of(obj)
        if err is not None:
            return BodyResult(error=err)
        n = _vectors(_list_field(obj, "data", "embeddings"), "embeddings", "embedding")
        return BodyResult(items=n, usage=_usage(obj))


class OpenAIRerankParser(BodyParser):
    """Jina/Cohere-style: ``results[*].{index, relevance_score}`` (vLLM, llama.cpp)."""

    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        obj = load_answer(body, "rerank")
        err = error_of(obj)
        if err is not None:
            return BodyResult(error=err)
        n = _scores(_list_field(obj, "results", "rerank"), "rerank", "relevance_score")
        return BodyResult(items=n, usage=_usage(obj))


class SGLangRerankParser(BodyParser):
    """SGLang's ``/v1/rerank``: a bare list of ``{score, document, index, meta_info}``, each
    result's ``meta_info.prompt_tokens`` its pair's tokens: the request's input tokens are
    their sum when every document came back (a top_n cut leaves n_in unknown)."""

    def __init__(self, documents: int | None = None) -> None:
        self.documents = documents

    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        obj = load_answer(body, "rerank")
        err = error_of(obj)
        if err is not None:
            return BodyResult(error=err)
        if not isinstance(obj, list):
            raise MalformedEvent(f"rerank answer is not a list of scores: {str(obj)[:120]!r}")
        n = _scores(obj, "rerank", "score")
        tokens = [int_or_none((r.get("meta_info") or {}).get("prompt_tokens")) for r in obj]
        whole = tokens and None not in tokens and n == self.documents
        usage = Usage(prompt_tokens=sum(t for t in tokens if t)) if whole else None
        return BodyResult(items=n, usage=usage)


class TEIEmbedParser(BodyParser):
    """TEI's ``/embed``: a bare list of vectors; tokens from ``x-compute-tokens``."""

    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        obj = load_answer(body, "embeddings")
        err = error_of(obj)
        if err is not None:
            return BodyResult(error=err)
        if not isinstance(obj, list):
            raise MalformedEvent(f"embeddings answer is not a list of vectors: {str(obj)[:120]!r}")
        return BodyResult(items=_vectors(obj, "embeddings"), usage=_header_tokens(headers),
                          server_timings=_tei_timings(headers))  # fmt: skip


class TEIRerankParser(BodyParser):
    """TEI's ``/rerank``: a bare list of ``{index, score}``; tokens from ``x-compute-tokens``.
    TEI has no top_n: it scores every text."""

    honours_top_n = False

    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        obj = load_answer(body, "rerank")
        err = error_of(obj)
        if err is not None:
            return BodyResult(error=err)
        if not isinstance(obj, list):
            raise MalformedEvent(f"rerank answer is not a list of scores: {str(obj)[:120]!r}")
        return BodyResult(items=_scores(obj, "rerank", "score"), usage=_header_tokens(headers),
                          server_timings=_tei_timings(headers))  # fmt: skip


class OllamaEmbedParser(BodyParser):
    """Ollama's ``/api/embed``: ``embeddings`` and ``prompt_eval_count``."""

    def parse_body(self, body: bytes, headers: Mapping[str, str]) -> BodyResult:
        obj = load_answer(body, "embeddings")
        err = error_of(obj)
        if err is not None:
            return BodyResult(error=err)
        n = _vectors(_list_field(obj, "embeddings", "embeddings"), "embeddings")
        tokens = int_or_none(obj.get("prompt_eval_count"))
        return BodyResult(items=n, usage=Usage(prompt_tokens=tokens) if tokens is not None else None)


def _inputs(request: GenerationRequest) -> list[str]:
    if request.inputs is None:
        raise ValueError("an embeddings request needs its inputs")
    return request.inputs


def _query_documents(request: GenerationRequest) -> tuple[str, list[str]]:
    if request.query is None or request.documents is None:
        raise ValueError("a rerank request needs its query and documents")
    return request.query, request.documents


def openai_embeddings_body(adapter: EngineAdapter, request: GenerationRequest) -> dict[str, Any]:
    return {
        "model": adapter.options.model or "default",
        "input": _inputs(request),
        "encoding_format": "float",
    }


def openai_rerank_body(adapter: EngineAdapter, request: GenerationRequest) -> dict[str, Any]:
    query, documents = _query_documents(request)
    body: dict[str, Any] = {
        "model": adapter.options.model or "default",
        "query": query,
        "documents": documents,
    }
    if request.top_n is not None:
        body["top_n"] = request.top_n
    return body


def tei_embed_body(adapter: EngineAdapter, request: GenerationRequest) -> dict[str, Any]:
    return {"inputs": _inputs(request)}


def tei_rerank_body(adapter: EngineAdapter, request: GenerationRequest) -> dict[str, Any]:
    # TEI has no top_n: it scores every text (the answer is due one score per document).
    query, documents = _query_documents(request)
    return {"query": query, "texts": documents}


def ollama_embed_body(adapter: EngineAdapter, request: GenerationRequest) -> dict[str, Any]:
    return {"model": adapter.options.model or "default", "input": _inputs(request)}


def _plain(cls: type[BodyParser]) -> Callable[[GenerationRequest], BodyParser]:
    return lambda request: cls()


def _sglang_rerank(request: GenerationRequest) -> BodyParser:
    return SGLangRerankParser(len(request.documents) if request.documents is not None else None)


@dataclass(frozen=True, slots=True)
class KindWire:
    """One kind on one engine: where it goes, its body, the parser of its answer."""

    path: str
    body: BodyBuilder
    # The parser of one request's answer, given that request.
    parser: Callable[[GenerationRequest], BodyParser]


OPENAI_EMBEDDINGS = KindWire("/v1/embeddings", openai_embeddings_body, _plain(OpenAIEmbeddingsParser))
OPENAI_RERANK = KindWire("/v1/rerank", openai_rerank_body, _plain(OpenAIRerankParser))
OPENAI_KINDS = {EMBEDDINGS: OPENAI_EMBEDDINGS, RERANK: OPENAI_RERANK}
SGLANG_KINDS = {
    EMBEDDINGS: OPENAI_EMBEDDINGS,
    RERANK: KindWire("/v1/rerank", openai_rerank_body, _sglang_rerank),
}
TEI_KINDS = {
    EMBEDDINGS: KindWire("/embed", tei_embed_body, _plain(TEIEmbedParser)),
    RERANK: KindWire("/rerank", tei_rerank_body, _plain(TEIRerankParser)),
}
OLLAMA_KINDS = {EMBEDDINGS: KindWire("/api/embed", ollama_embed_body, _plain(OllamaEmbedParser))}


def paths_of(wires: Mapping[str, KindWire]) -> dict[str, str]:
    """An adapter's ``kind_paths`` from its wires."""
    return {kind: wire.path for kind, wire in wires.items()}


class KindRequests:
    """Mixed into an adapter: builds and parses the kinds of its ``kind_wires``. The adapter's
    ``build_request`` hands a request whose kind is not chat to ``kind_request``."""

    kind_wires: ClassVar[dict[str, KindWire]] = {}

    def wire_of(self, request: GenerationRequest) -> KindWire:
        wire = self.kind_wires.get(request.kind)
        if wire is None:
            raise ValueError(
                f"engine {getattr(self, 'name', '?')!r} does not serve {request.kind!r} requests"
            )
        return wire

    def kind_request(self, request: GenerationRequest) -> HttpRequest:
        assert isinstance(self, EngineAdapter)
        wire = self.wire_of(request)
        body = wire.body(self, request)
        body.update(self.options.extra_body)
        body.update(request.extra_body)
        headers = self.base_headers()
        headers["Accept"] = "application/json"
        return HttpRequest("POST", wire.path, orjson.dumps(body), headers)

    def new_body_parser(self, request: GenerationRequest) -> BodyParser:
        return self.wire_of(request).parser(request)
