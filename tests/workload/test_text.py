"""Prompts with exact token counts: real tokenizers (trained locally) and a tokenize endpoint."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tokenizers import Tokenizer

from loadkit.workload import load_scenario
from loadkit.workload.servertok import server_builder
from loadkit.workload.text import ApproxBuilder, hf_builder, pseudo_words

TARGETS = [1, 2, 3, 7, 31, 100, 257, 512, 1000, 4096]


def n_tokens(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("fixture", ["bpe_tokenizer_path", "bytelevel_tokenizer_path"])
def test_exact_prompts_hit_target_with_real_tokenizer(request, fixture):
    path = request.getfixturevalue(fixture)
    tok = Tokenizer.from_file(path)
    builder = hf_builder(path)
    for target in TARGETS:
        for key in range(3):
            text = builder.text(11, (key, target), target)
            assert n_tokens(tok, text) == target, (fixture, target, key)
    assert builder.misses == 0


def test_pseudo_words_cost_more_than_one_bpe_token(bpe_tokenizer_path):
    """Why exact mode exists: the approximate one-word-one-token guess is off for real BPEs."""
    tok = Tokenizer.from_file(bpe_tokenizer_path)
    text = ApproxBuilder().text(3, (1,), 500)
    assert len(text.split()) == 500
    assert n_tokens(tok, text) > 550


def test_text_is_deterministic_and_key_dependent():
    a = pseudo_words(5, (1, 2), 50)
    assert a == pseudo_words(5, (1, 2), 50)
    assert a != pseudo_words(5, (1, 3), 50) and a != pseudo_words(6, (1, 2), 50)
    # Shorter texts are prefixes of longer ones for the same key: truncated blocks share prefixes.
    assert pseudo_words(5, (9,), 20) == pseudo_words(5, (9,), 512)[:20]


def test_scenario_with_hf_tokenizer_builds_exact_requests(write_scenario, bpe_tokenizer_path):
    path = write_scenario(f"""
        [prompt]
        tokenizer = "hf"
        tokenizer_path = "{bpe_tokenizer_path}"
        shape = "prompt"
        [[parts]]
        name = "p"
        input = {{ dist = "uniform", low = 5, high = 900 }}
        output = 8
    """)
    tok = Tokenizer.from_file(bpe_tokenizer_path)
    source = load_scenario(path).request_source()
    for _ in range(40):
        req = source.next_item()
        assert n_tokens(tok, req.prompt) == req.n_in_target
    real = source.realised()
    assert real["approximate"] is False and real["exact_misses"] == 0
    assert real["tokenizer"].startswith("hf:")


class _TokenizeHandler(BaseHTTPRequestHandler):
    """A llama.cpp-shaped /tokenize endpoint backed by a local tokenizer."""

    tok: Tokenizer
    calls = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls += 1
        ids = self.tok.encode(body["content"], add_special_tokens=False).ids
        data = json.dumps({"tokens": ids}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_server_tokenize_endpoint_gives_exact_prompts(bytelevel_tokenizer_path):
    tok = Tokenizer.from_file(bytelevel_tokenizer_path)
    handler = type("H", (_TokenizeHandler,), {"tok": tok, "calls": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        builder = server_builder(f"http://127.0.0.1:{server.server_port}/tokenize", "llamacpp")
        for target in (1, 9, 150, 600):
            assert n_tokens(tok, builder.text(2, (target,), target)) == target
        assert handler.calls > 0
    finally:
        server.shutdown()
        server.server_close()


def test_fast_text_equals_joined_words():
    from loadkit.workload.text import pseudo_text

    for n in (0, 1, 2, 513):
        assert pseudo_text(8, (4, n), n) == " ".join(pseudo_words(8, (4, n), n))
