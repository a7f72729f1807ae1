"""The scenarios' ``tokenizer = "server"`` counts through the engine adapter's own tokenize
request and reading (one tokenize path, loadkit.servers.info.tokenize), at the URL's path."""

from __future__ import annotations

import orjson
import pytest

from loadkit.core.adapter import AdapterOptions
from loadkit.servers.info import TokenizeError, count_tokens
from loadkit.sim.testing import sim_thread
from loadkit.workload.servertok import ADAPTERS, FORMATS, server_builder
from tests.helpers.stubserver import Answer, stub_server

ANSWERS = {
    "llamacpp": b'{"tokens": [1, 2, 3]}',
    "vllm": b'{"count": 3, "tokens": [1, 2, 3], "max_model_len": 4096}',
    "tgi": b'[{"id": 1}, {"id": 2}, {"id": 3}]',
}


def test_formats_are_the_adapters_with_a_tokenize_endpoint() -> None:
    assert FORMATS == ("llamacpp", "vllm", "tgi")
    for fmt in FORMATS:
        assert ADAPTERS[fmt].name == fmt
        assert ADAPTERS[fmt](AdapterOptions()).tokenize_request("x") is not None


@pytest.mark.parametrize("fmt", FORMATS)
def test_server_builder_sends_the_adapters_request_to_the_urls_path(fmt: str) -> None:
    adapter = ADAPTERS[fmt](AdapterOptions(model="m"))
    expected = adapter.tokenize_request("one two three")
    assert expected is not None
    with stub_server({("POST", "/custom/tokenize"): Answer(ANSWERS[fmt])}) as (url, server):
        count = server_builder(f"{url}/custom/tokenize", fmt, "m").count
        assert count("one two three") == 3
        assert count("one two three") == 3  # cached: asked once
        (method, path, headers, body) = server.seen[0]
        assert len(server.seen) == 1 and (method, path) == ("POST", "/custom/tokenize")
        assert orjson.loads(body) == orjson.loads(expected.body or b"")
        assert headers["Content-Type"] == "application/json"


def test_server_builder_says_when_the_answer_has_no_count() -> None:
    with stub_server({("POST", "/tokenize"): Answer(b'{"detail": "no"}')}) as (url, _):
        count = server_builder(f"{url}/tokenize", "vllm").count
        with pytest.raises(TokenizeError, match="without a token count"):
            count("hello")
    with stub_server({}) as (url, _), pytest.raises(TokenizeError, match="HTTP 404"):
        server_builder(f"{url}/tokenize", "llamacpp").count("hello")


@pytest.mark.parametrize("fmt", FORMATS)
def test_server_builder_and_count_tokens_agree_on_the_simulator(fmt: str) -> None:
    family = {"vllm": "openai"}.get(fmt, fmt)
    with sim_thread(family=family, profile="fast") as sim:
        adapter = ADAPTERS[fmt](AdapterOptions(model="sim"))
        text = "alpha beta gamma delta"
        n = server_builder(sim.url + "/tokenize", fmt, "sim").count(text)
        assert n > 0 and count_tokens(adapter, sim.url, text) == n
