"""The llamacpp adapter against a real llama-server (built from the pinned sdist, tiny
random-weight model): every api through the stream timer, detection, server info, the
server's tokenizer, prefix-cache reporting and metrics scraping."""

import pytest

from loadkit import types as t
from loadkit.client import timer
from loadkit.engines.base import AdapterOptions
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.plugins import new_plugin_manager
from loadkit.servers.detect import detect_engine
from loadkit.servers.info import count_tokens, describe
from loadkit.servers.metrics import scrape
from loadkit.testing import llamacpp

pytestmark = pytest.mark.integration
TIMEOUTS = timer.Timeouts(connect_s=5, first_token_s=60, total_s=120)


@pytest.fixture(scope="module")
def llama():
    with llamacpp.pytest_llama_server(slots=2, ctx=1024) as srv:
        yield srv


def run(srv, api, prompt="The quick brown fox jumps over the lazy dog.", max_tokens=8):
    adapter = LlamaCppAdapter(AdapterOptions(model="tiny", api=api))
    return timer.run_request(
        adapter, srv.url, t.GenerationRequest(prompt=prompt, max_tokens=max_tokens), timeouts=TIMEOUTS
    )


@pytest.mark.parametrize("api", ["native", "chat", "completions"])
def test_exact_output_through_the_timer(llama, api):
    record = run(llama, api)
    assert record.outcome == t.OK, record.error
    assert (record.n_out, record.n_out_source) == (8, "usage")
    assert sum(record.event_tokens) == 8  # ignore_eos: exactly max_tokens, one token per event
    assert record.n_in is not None and record.n_in > 0
    assert record.server_timings is not None and record.server_timings["predicted_n"] == 8


def test_repeated_prompt_reports_cached_tokens(llama):
    prompt = llama.prompt_of_length(200, seed=3)
    first, second = run(llama, "native", prompt), run(llama, "native", prompt)
    assert first.outcome == second.outcome == t.OK
    assert second.cached_tokens is not None and second.cached_tokens >= 150


def test_detect_describe_tokenize_scrape(llama):
    found = detect_engine(llama.url, new_plugin_manager(load_entry_points=False))
    assert found.engine == "llamacpp", found.explanation
    adapter = LlamaCppAdapter(AdapterOptions(model="tiny"))
    info = describe(adapter, llama.url)
    assert info["model"] and info["max_model_len"] > 0
    text = "hello world, again and again"
    assert count_tokens(adapter, llama.url, text) == len(
        llama.tokenizer().encode(text, add_special_tokens=False).ids
    )
    values = scrape(adapter, llama.url)
    assert {"running", "waiting", "prefix_hit_rate"} <= set(values)


@pytest.mark.parametrize("api", ["native", "completions"])
def test_prompt_over_context_is_an_http_error(llama, api):
    record = run(llama, api, prompt=llama.prompt_of_length(1500, seed=5))
    assert record.outcome == t.http_error(400) and "context" in (record.error or "")
