"""A kind answered in one body (embeddings, rerank) through the real client: sent with
``Accept: application/json``, its whole body read through the stamped reader, parsed once, and
classified exactly (client/bodies.py). Against the simulator over loopback, each request is
checked against the simulator's truth log; byte-exact edge cases against a scripted server."""

from __future__ import annotations

import os
import tempfile
import time

import orjson
import pytest

from loadkit import types as t
from loadkit.client.timer import Timeouts, run_request
from loadkit.core.kinds import BodyParser
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.openai import OpenAIAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.sim.testing import sim_thread
from loadkit.sim.textgen import tokenize
from loadkit.types import GenerationRequest
from tests.helpers.scripted_server import Script, ScriptedServer

INPUTS = ["the first input to embed", "a second, longer input to embed in the same batch", "third"]
DOCS = ["Paris is the capital of France.", "Horses and cows", "Lyon is a city", "a fourth document"]


def embeddings(n: int = 3) -> GenerationRequest:
    return GenerationRequest(kind="embeddings", inputs=INPUTS[:n], n_items=n)


def rerank(top_n: int | None = None) -> GenerationRequest:
    return GenerationRequest(kind="rerank", query="capital of France", documents=DOCS, n_items=4, top_n=top_n)


@pytest.fixture
def truth_path():
    with tempfile.TemporaryDirectory() as d:
        yield os.path.join(d, "truth.jsonl")


def _truth(sim, rid: str) -> dict:
    return sim.wait_truth_for({rid})[rid]


@pytest.mark.parametrize(
    "family, adapter, request_, path",
    [
        ("openai", VLLMAdapter, embeddings(), "/v1/embeddings"),
        ("openai", VLLMAdapter, rerank(), "/v1/rerank"),
        ("openai", VLLMAdapter, rerank(top_n=2), "/v1/rerank"),
        ("sglang", SGLangAdapter, embeddings(), "/v1/embeddings"),
        ("sglang", SGLangAdapter, rerank(), "/v1/rerank"),
        ("tgi", TGIAdapter, embeddings(), "/embed"),
        ("tgi", TGIAdapter, rerank(top_n=2), "/rerank"),  # TEI scores every document
        ("ollama", OllamaAdapter, embeddings(), "/api/embed"),
    ],
)  # fmt: skip
def test_ok_answers_agree_with_the_servers_truth(truth_path, family, adapter, request_, path):
    with sim_thread(family, truth_log=truth_path) as sim:
        rec = run_request(adapter(), sim.url, request_)
        truth = _truth(sim, rec.request_id)
    assert (rec.outcome, rec.error, rec.end) == (t.OK, None, "body")
    assert (rec.kind, rec.n_items) == (request_.kind, request_.n_items)
    returned = request_.n_items if request_.top_n is None or family == "tgi" else request_.top_n
    assert rec.n_items_returned == returned
    assert (truth["path"], truth["kind"], truth["items"], truth["completion_tokens"]) == (
        path,
        request_.kind,
        request_.n_items,
        0,
    )
    # The input tokens are the server's count: each input's, or each query + document pair's.
    pieces = INPUTS if request_.kind == "embeddings" else [request_.query + " " + d for d in DOCS]
    expected_in = (
        sum(len(tokenize(p)) for p in pieces) if request_.kind == "embeddings" else truth["prompt_tokens"]
    )
    assert truth["prompt_tokens"] == expected_in
    if family == "sglang" and request_.kind == "rerank" and request_.top_n:
        assert rec.n_in is None
    else:
        assert rec.n_in == truth["prompt_tokens"]
    # No token events; the end is the arrival of the read that completed the body, after its write.
    assert rec.t_first_ns is None and rec.event_t_ns == [] and rec.n_out is None
    written = truth["t_token_ns"][0]
    assert rec.t_send_ns < truth["t_arrival_ns"] <= written <= rec.t_end_ns
    assert rec.t_headers_ns is not None and rec.t_headers_ns <= rec.t_end_ns
    assert rec.t_end_ns - written < 50_000_000  # read within 50 ms of the write on loopback
    row = rec.to_json()
    assert row["ttft_ms"] is None and row["latency_ms"] == pytest.approx((rec.t_end_ns - rec.t_send_ns) / 1e6)
    assert row["latency_per_item_ms"] == pytest.approx(row["latency_ms"] / request_.n_items)


def test_the_simulator_charges_prefill_per_token_of_the_batch(truth_path):
    """Cost model: one prefill over every input's tokens, no decode: a batch 20x larger takes
    longer by about 20x its tokens at the profile's prefill rate (200 us/token here)."""
    small = GenerationRequest(kind="embeddings", inputs=["w " * 40], n_items=1)
    big = GenerationRequest(kind="embeddings", inputs=["w " * 40] * 20, n_items=20)
    with sim_thread("openai", truth_log=truth_path, prefill_us_per_token=200.0, decode_base_ms=1.0) as sim:
        a = VLLMAdapter()
        r_small, r_big = run_request(a, sim.url, small), run_request(a, sim.url, big)
        stages = [_truth(sim, r.request_id)["server_stages_ms"] for r in (r_small, r_big)]
    assert r_small.outcome == r_big.outcome == t.OK
    extra_tokens = r_big.n_in - r_small.n_in
    assert extra_tokens == 19 * r_small.n_in
    # the big batch's prefill takes at least its tokens' time, beyond the small one's
    assert stages[1]["prefill"] - stages[0]["prefill"] >= extra_tokens * 0.2 * 0.9
    assert (r_big.t_end_ns - r_big.t_send_ns) - (
        r_small.t_end_ns - r_small.t_send_ns
    ) >= extra_tokens * 0.2e6 * 0.9


@pytest.mark.parametrize(
    "fault, outcome, message",
    [
        ("error_event", t.IN_BAND_ERROR, "simulated engine error"),
        ("malformed", t.MALFORMED_STREAM, "embeddings answer is not JSON"),
        ("drop_mid_stream", t.DISCONNECTED, "connection lost"),
        ("close_early", t.DISCONNECTED, "before the whole answer arrived"),
        ("http_503", "http_error:503", "HTTP 503"),
    ],
)
def test_simulator_faults_on_a_body_are_classified_exactly(truth_path, fault, outcome, message):
    with sim_thread("openai", truth_log=truth_path) as sim:
        rec = run_request(VLLMAdapter(), sim.url, embeddings(), extra_headers={"X-Loadkit-Fault": fault})
        truth = _truth(sim, rec.request_id)
    assert rec.outcome == outcome and message in (rec.error or "")
    assert truth["fault"] == fault


def test_a_long_computation_waits_for_the_total_limit_not_the_first_token_limit(truth_path):
    """A non-streamed request never sends a first token: first_token_s must not cut a server
    still computing it; total_s bounds the wait (here the stall fault never answers)."""
    timeouts = Timeouts(first_token_s=0.2, total_s=1.0)
    with sim_thread("openai", truth_log=truth_path, prefill_us_per_token=1000.0) as sim:
        slow = GenerationRequest(kind="embeddings", inputs=["w " * 200] * 2, n_items=2)  # ~0.4 s of prefill
        rec = run_request(VLLMAdapter(), sim.url, slow, timeouts=timeouts)
        assert rec.outcome == t.OK, rec.error
        assert (rec.t_end_ns - rec.t_send_ns) / 1e9 > 0.2
        t0 = time.perf_counter()
        stalled = run_request(VLLMAdapter(), sim.url, embeddings(), timeouts=timeouts,
                              extra_headers={"X-Loadkit-Fault": "stall_after"})  # fmt: skip
    assert stalled.outcome == t.TIMEOUT_TOTAL and stalled.error == "no answer within 1 s"
    assert 0.9 < time.perf_counter() - t0 < 3.0


def _answer(body: bytes, headers: bytes = b"") -> Script:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%b\r\n" % (
        len(body),
        headers,
    )
    return Script(head=head, writes=[(0.0, body)])


def test_sent_as_json_and_fewer_answers_than_items_is_incomplete():
    body = orjson.dumps({"data": [{"embedding": [0.1, 0.2]}] * 2, "usage": {"prompt_tokens": 9}})
    with ScriptedServer(lambda _req: _answer(body)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, embeddings(3))
    request = srv.requests[0]
    assert b"POST /v1/embeddings HTTP/1.1" in request and b"\r\nAccept: application/json\r\n" in request
    assert (rec.outcome, rec.error) == (t.INCOMPLETE, "2 embeddings for 3 inputs")
    assert (rec.n_in, rec.n_items_returned, rec.end) == (9, 2, None)


def test_a_body_split_over_reads_ends_at_the_read_that_completed_it():
    body = orjson.dumps({"data": [{"embedding": [0.5] * 200}] * 3, "usage": {"prompt_tokens": 12}})
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    script = Script(head=head, writes=[(0.0, body[:100]), (0.15, body[100:400]), (0.15, body[400:])])
    with ScriptedServer(lambda _req: script) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, embeddings(3))
    assert rec.outcome == t.OK and rec.n_in == 12
    last_write = srv.write_times[0][-1]
    assert last_write <= rec.t_end_ns < last_write + 50_000_000
    assert rec.t_end_ns - rec.t_headers_ns >= 250_000_000  # the head came first, the body's end 0.3 s later


def test_a_parser_bug_is_an_adapter_error_naming_the_call():
    class Buggy(BodyParser):
        def parse_body(self, body, headers):
            raise KeyError("data")

    class Adapter(OpenAIAdapter):
        name = "buggy"

        def new_body_parser(self, request):
            return Buggy()

    with ScriptedServer(lambda _req: _answer(b"{}")) as srv:
        rec = run_request(Adapter(), srv.url, embeddings(1))
    assert rec.outcome == t.ADAPTER_ERROR and "parse_body raised KeyError" in rec.error


def test_tei_token_count_from_its_header():
    with ScriptedServer(lambda _req: _answer(b"[[0.1],[0.2],[0.3]]", b"x-compute-tokens: 17\r\n")) as srv:
        rec = run_request(TGIAdapter(), srv.url, embeddings(3))
    assert (rec.outcome, rec.n_in, rec.n_items_returned) == (t.OK, 17, 3)
