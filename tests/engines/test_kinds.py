"""Embeddings and rerank in every built-in adapter: the request each engine takes (path and
body) and its answer, parsed from recorded bodies in each engine's own shape
(tests/engines/fixtures/README.md names the sources)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadkit.core.adapter import AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.openai import OpenAIAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.types import GenerationRequest, MalformedEvent

FIXTURES = Path(__file__).parent / "fixtures"
EMB = GenerationRequest(kind="embeddings", inputs=["first input", "second one"], n_items=2)
RERANK = GenerationRequest(kind="rerank", query="capital of France?", n_items=3, top_n=2,
                           documents=["Horses and cows", "The capital of France is Paris.", "Lyon"])  # fmt: skip


def fixture(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


@pytest.mark.parametrize(
    "adapter, request_, path, body",
    [
        (VLLMAdapter, EMB, "/v1/embeddings", {"model": "m", "input": ["first input", "second one"],
                                              "encoding_format": "float"}),
        (VLLMAdapter, RERANK, "/v1/rerank", {"model": "m", "query": "capital of France?", "top_n": 2,
                                             "documents": RERANK.documents}),
        (SGLangAdapter, EMB, "/v1/embeddings", None),
        (SGLangAdapter, RERANK, "/v1/rerank", None),
        (LlamaCppAdapter, EMB, "/v1/embeddings", None),
        (LlamaCppAdapter, RERANK, "/v1/rerank", None),
        (TGIAdapter, EMB, "/embed", {"inputs": ["first input", "second one"]}),
        (TGIAdapter, RERANK, "/rerank", {"query": "capital of France?", "texts": RERANK.documents}),
        (OllamaAdapter, EMB, "/api/embed", {"model": "m", "input": ["first input", "second one"]}),
    ],
)  # fmt: skip
def test_each_engine_gets_the_kind_at_its_path_in_its_shape(adapter, request_, path, body):
    a = adapter(AdapterOptions(model="m", extra_body={"truncate": True}))
    http = a.build_request(request_)
    assert (http.method, http.path) == ("POST", path)
    assert http.headers["Accept"] == "application/json"
    sent = orjson.loads(http.body)
    assert "stream" not in sent and "max_tokens" not in sent  # nothing of a generation leaks in
    assert sent["truncate"] is True  # --extra-body applies to every kind
    if body is not None:
        del sent["truncate"]
        assert sent == body
    assert a.kind_paths[request_.kind] == path and a.serves(request_.kind)


def test_engines_without_the_endpoint_do_not_serve_it():
    assert not OllamaAdapter().serves("rerank")
    assert not TensorRTLLMAdapter().serves("embeddings") and not TensorRTLLMAdapter().serves("rerank")
    assert TensorRTLLMAdapter().serves("chat") and OpenAIAdapter().serves("chat")
    with pytest.raises(ValueError, match="'ollama' does not serve 'rerank'"):
        OllamaAdapter().build_request(RERANK)


@pytest.mark.parametrize(
    "adapter, request_, body, headers, items, tokens",
    [
        (VLLMAdapter, EMB, "vllm/embeddings.json", {}, 2, 13),
        (VLLMAdapter, RERANK, "vllm/rerank.json", {}, 2, 41),  # usage.total_tokens
        (SGLangAdapter, EMB, "sglang/embeddings.json", {}, 1, 7),
        # Every document back: the pairs' meta_info.prompt_tokens summed.
        (SGLangAdapter, GenerationRequest(kind="rerank", query="q", documents=["hi", "panda"], n_items=2),
         "sglang/rerank.json", {}, 2, 42),
        (SGLangAdapter, RERANK, "sglang/rerank.json", {}, 2, None),  # a top_n cut: input tokens unknown
        (TGIAdapter, EMB, "tei/embed.json", {"x-compute-tokens": "11"}, 2, 11),
        (TGIAdapter, RERANK, "tei/rerank.json", {"x-compute-tokens": "30"}, 3, 30),
        (TGIAdapter, EMB, "tei/embed.json", {}, 2, None),  # no header: no count
        (OllamaAdapter, EMB, "ollama/embed.json", {}, 2, 8),
        # Real captures from llama-server (--embeddings --pooling mean; --reranking, top_n 2 of 3).
        (LlamaCppAdapter, EMB, "llamacpp/embeddings.json", {}, 2, 12),
        (LlamaCppAdapter, RERANK, "llamacpp/rerank.json", {}, 2, 19),
    ],
)  # fmt: skip
def test_answers_are_counted_with_the_servers_token_count(adapter, request_, body, headers, items, tokens):
    result = adapter().new_body_parser(request_).parse_body(fixture(body), headers)
    assert result.error is None
    assert result.items == items
    assert (result.usage.prompt_tokens if result.usage else None) == tokens


def test_tei_stage_times_come_from_its_headers():
    headers = {
        "x-compute-tokens": "11",
        "x-queue-time": "3",
        "x-inference-time": "12",
        "x-tokenization-time": "0",
    }
    result = TGIAdapter().new_body_parser(EMB).parse_body(fixture("tei/embed.json"), headers)
    assert result.server_timings == {"tokenization": 0, "queue": 3, "inference": 12}


@pytest.mark.parametrize(
    "adapter, request_, body, message",
    [
        (VLLMAdapter, EMB, "vllm/embeddings_error.json", "maximum context length is 512"),
        (TGIAdapter, EMB, "tei/error.json", "must have less than 512 tokens"),
        (OllamaAdapter, EMB, None, "model 'x' not found"),
    ],
)  # fmt: skip
def test_an_error_object_in_the_body_is_the_in_band_error(adapter, request_, body, message):
    raw = fixture(body) if body else b'{"error":"model \'x\' not found"}'
    result = adapter().new_body_parser(request_).parse_body(raw, {})
    assert result.error is not None and message in result.error


@pytest.mark.parametrize(
    "adapter, request_, body, message",
    [
        (VLLMAdapter, EMB, b'{"object":"list","data":[{"embedding":[0.1,', "embeddings answer is not JSON"),
        (VLLMAdapter, EMB, b'{"object":"list"}', "no 'data' list"),
        (VLLMAdapter, EMB, b'{"data":[{"embedding":"AAAA"}]}', "'embedding' of item 0 is not a vector"),
        (VLLMAdapter, RERANK, b'{"results":[{"index":0}]}', "result 0 needs an integer 'index' and a numeric 'relevance_score'"),
        (SGLangAdapter, RERANK, b'{"results":[]}', "not a list of scores"),
        (TGIAdapter, EMB, b'{"embeddings":[]}', "not a list of vectors"),
        (OllamaAdapter, EMB, b'{"embedding":[0.1]}', "no 'embeddings' list"),
        (VLLMAdapter, EMB, b"", "not JSON"),
    ],
)  # fmt: skip
def test_a_body_that_is_not_the_kinds_answer_is_malformed_naming_what(adapter, request_, body, message):
    with pytest.raises(MalformedEvent, match=message):
        adapter().new_body_parser(request_).parse_body(body, {})


def test_tei_rerank_scores_every_document_whatever_top_n():
    """TEI has no top_n: its parser says so, and the client then expects one score per document."""
    assert TGIAdapter().new_body_parser(RERANK).honours_top_n is False
    assert VLLMAdapter().new_body_parser(RERANK).honours_top_n is True
    assert "top_n" not in orjson.loads(TGIAdapter().build_request(RERANK).body)
