"""Embeddings and rerank against a real llama.cpp server with the suite's tiny model, through
the real client: a Locust run of single and batched embeddings (conservation, the server's
token counts, items), rerank with ``--reranking``, and the server's refusal of OpenAI
embeddings without a pooling type (docs/engines.md, "Which engine serves what")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadkit import types as t
from loadkit.client.timer import run_request
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.testing import llamacpp
from loadkit.testing.llamacpp import LlamaServer
from loadkit.types import GenerationRequest
from tests.helpers.runs import check_conservation, raw_records
from tests.integration.test_locustfiles import run_file

pytestmark = pytest.mark.integration

EMBEDDER = Path(__file__).resolve().parents[1] / "integration" / "locustfiles" / "kinds.py"
LENGTHS = (12, 30, 7, 50)  # tokens of each input, BOS included (the server counts it)


@pytest.fixture(scope="module")
def embedder() -> Iterator[LlamaServer]:
    with llamacpp.pytest_llama_server(
        slots=2, ctx=512, extra_args=["--embeddings", "--pooling", "mean"]
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def reranker() -> Iterator[LlamaServer]:
    # The tiny model has no classification head: llama.cpp's rank pooling still scores (the
    # scores mean nothing), which is all a load test needs of it.
    with llamacpp.pytest_llama_server(slots=2, ctx=512, extra_args=["--reranking"]) as srv:
        yield srv


def test_a_locust_run_of_single_and_batched_embeddings(embedder, tmp_path):
    inputs = [embedder.prompt_of_length(n, seed=i) for i, n in enumerate(LENGTHS)]
    proc = run_file(EMBEDDER, "-u", "2", "-r", "2", "-t", "30s", "--host", embedder.url, "--engine", "llamacpp",
                    "--max-requests", "24", "--raw-log", "--report-dir", str(tmp_path / "r"),
                    env={"LOADKIT_TEST_INPUTS": json.dumps(inputs)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    assert report["conservation"]["sent"] == 24
    rows = raw_records(tmp_path / "r")
    assert len(rows) == 24 and {r["outcome"] for r in rows} == {"ok"}, {r["outcome"] for r in rows}
    for r in rows:
        n = r["n_items"]
        assert (r["kind"], r["end"], r["n_items_returned"]) == ("embeddings", "body", n)
        # The server's usage: every input's tokens, BOS included, exactly as the tokenizer says.
        assert r["n_in"] == sum(LENGTHS[:n]), r
        assert r["ttft_ms"] is None and r["n_events"] == 0
        assert r["latency_ms"] > 0 and r["latency_ms"] == pytest.approx(r["e2e_ms"])
        if n > 1:
            assert r["latency_per_item_ms"] == pytest.approx(r["latency_ms"] / n)
        else:
            assert r["latency_per_item_ms"] is None
    assert sorted({r["n_items"] for r in rows}) == [1, 4]


def test_without_a_pooling_type_the_server_refuses_openai_embeddings():
    """The tiny model declares no pooling: ``--embeddings`` alone gets /v1/embeddings a 400
    ("Pooling type 'none' is not OAI compatible"), an http_error with the server's words; the
    suite starts it with ``--pooling mean`` (docs/engines.md)."""
    with llamacpp.pytest_llama_server(slots=1, ctx=256, extra_args=["--embeddings"]) as srv:
        rec = run_request(
            LlamaCppAdapter(), srv.url, GenerationRequest(kind="embeddings", inputs=["a b"], n_items=1)
        )
    assert rec.outcome == "http_error:400"
    assert "Pooling type 'none' is not OAI compatible" in (rec.error or "")


@pytest.mark.parametrize("top_n", [None, 2])
def test_rerank_through_the_client(reranker, top_n):
    docs = [reranker.prompt_of_length(n, seed=10 + i) for i, n in enumerate((9, 20, 5))]
    request = GenerationRequest(kind="rerank", query="which one", documents=docs, n_items=3, top_n=top_n)
    rec = run_request(LlamaCppAdapter(), reranker.url, request)
    assert (rec.outcome, rec.error, rec.end) == (t.OK, None, "body")
    assert rec.n_items_returned == (top_n or 3)
    # The server's count of every query + document pair (not only the top_n returned).
    answer = reranker.post("/v1/rerank", {"query": "which one", "documents": docs, "model": "x"})
    assert rec.n_in == answer["usage"]["prompt_tokens"] > sum((9, 20, 5))
    assert (
        rec.t_first_ns is None and rec.t_end_ns >= rec.t_headers_ns >= rec.t_send_ns
    )  # one read may hold both
