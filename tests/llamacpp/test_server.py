"""A real llama-server started by loadkit.testing.llamacpp: endpoints, counts, timings, slots.

One server per module (4 slots, continuous batching, 2048 tokens per slot). Requests use
`ignore_eos` so the number of generated tokens is exactly what was asked.
"""

from __future__ import annotations

import threading

import pytest

from loadkit.testing.llamacpp import LlamaServer

from .conftest import CTX, SLOTS
from .streaming import Stream, stream_post

pytestmark = pytest.mark.integration

MS = 1_000_000  # ns per ms


def native(srv: LlamaServer, prompt: str, n: int, **extra) -> Stream:
    body = {
        "prompt": prompt,
        "n_predict": n,
        "stream": True,
        "ignore_eos": True,
        "cache_prompt": False,
        **extra,
    }
    return stream_post(srv.url, "/completion", body)


def chat_prompt_tokens(srv: LlamaServer, messages: list[dict[str, str]]) -> int:
    """Prompt length the model's chatml template should give, counted offline."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return len(srv.tokenizer().encode(text + "<|im_start|>assistant\n").ids)


def test_health_props_and_slots(llama: LlamaServer):
    assert llama.get("/health") == {"status": "ok"}
    props = llama.get("/props")
    assert props["total_slots"] == SLOTS
    assert props["default_generation_settings"]["n_ctx"] == CTX
    slots = llama.get("/slots")
    assert len(slots) == SLOTS and all(not s["is_processing"] for s in slots)
    assert llama.model_path.name.endswith(".gguf") and llama.tokenizer_json.is_file()


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x ** 2  # squared\n\n\n",
    "  leading spaces, trailing   \t\n",
    "naïve café — 日本語 🙂 ünïcödé",
    "<|im_start|>user\nhi<|im_end|>\n",
    "1234567890 3.14159 0xdeadbeef",
    "a\nb\r\nc\u00a0d",
]


@pytest.mark.parametrize("text", TEXTS)
def test_tokenize_matches_tokenizer_json(llama: LlamaServer, text: str):
    server = llama.post("/tokenize", {"content": text, "add_special": True, "parse_special": True})
    assert server["tokens"] == llama.tokenizer().encode(text).ids


@pytest.mark.parametrize("n", [2, 64, 507])
def test_prompt_of_length_is_exact_on_the_server(llama: LlamaServer, n: int):
    prompt = llama.prompt_of_length(n, seed=n)
    assert len(llama.post("/tokenize", {"content": prompt, "add_special": True})["tokens"]) == n
    final = native(llama, prompt, 2).payloads()[-1]
    assert final["tokens_evaluated"] == n
    assert final["timings"]["prompt_n"] == n


def test_native_stream_counts_and_timings(llama: LlamaServer):
    prompt = llama.prompt_of_length(300, seed=1)
    s = native(llama, prompt, 32)
    tokens = [e for _, e in s.events if not e["stop"]]
    final = s.events[-1][1]
    assert final["stop"] is True and not s.done_sentinel  # native stream ends without [DONE]
    assert [len(e["tokens"]) for e in tokens] == [1] * 32
    assert [e["tokens_predicted"] for e in tokens] == list(range(1, 33))
    t = final["timings"]
    assert (t["prompt_n"], t["predicted_n"], final["tokens_predicted"]) == (300, 32, 32)
    assert t["prompt_ms"] > 0 and t["predicted_ms"] > 0
    # The server's prefill happens inside the client's TTFT window, so it cannot exceed it
    # (0.5 ms of slack for the two clocks' rounding).
    ttft_ms = (s.events[0][0] - s.t_send_ns) / MS
    assert t["prompt_ms"] <= ttft_ms + 0.5
    decode_ms = (s.events[len(tokens) - 1][0] - s.events[0][0]) / MS
    assert decode_ms <= t["predicted_ms"] + 100  # generous: scheduling noise on 2 shared cores


@pytest.mark.parametrize("seed", range(6))
def test_every_token_is_its_own_event(llama: LlamaServer, seed: int):
    """The model never emits unprintable tokens, so the server never holds one back: events
    equal tokens on every route (loadkit's integration tests rely on this)."""
    prompt = llama.prompt_of_length(30 + seed, seed=100 + seed)
    native_events = native(llama, prompt, 48, seed=seed).payloads()[:-1]
    assert [len(e["tokens"]) for e in native_events] == [1] * 48
    assert all(e["content"] for e in native_events)
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 48,
        "stream": True,
        "ignore_eos": True,
        "seed": seed,
    }
    chunks = stream_post(llama.url, "/v1/chat/completions", body).payloads()
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 48


def test_greedy_output_is_deterministic(llama: LlamaServer):
    prompt = llama.prompt_of_length(40, seed=2)
    runs = [native(llama, prompt, 16, temperature=0.0) for _ in range(2)]
    ids = [[tid for e in r.payloads() for tid in e.get("tokens", [])] for r in runs]
    assert len(ids[0]) == 16 and ids[0] == ids[1]


def test_seeded_sampling_is_deterministic(llama: LlamaServer):
    prompt = llama.prompt_of_length(40, seed=3)
    texts = ["".join(e["content"] for e in native(llama, prompt, 16, seed=42).payloads()) for _ in range(2)]
    assert texts[0] == texts[1] and texts[0]


@pytest.mark.parametrize("turns", [1, 3])
def test_chat_stream_usage_equals_request(llama: LlamaServer, turns: int):
    messages = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        messages.append({"role": "user", "content": llama.prompt_of_length(20 + i, seed=i)})
        if i < turns - 1:
            messages.append({"role": "assistant", "content": f"answer number {i}"})
    body = {
        "model": "tiny",
        "messages": messages,
        "max_tokens": 24,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    s = stream_post(llama.url, "/v1/chat/completions", body)
    chunks = s.payloads()
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    usage = chunks[-1]["usage"]
    assert s.done_sentinel and chunks[-1]["choices"] == []
    assert usage["completion_tokens"] == 24 == len(content)
    assert usage["prompt_tokens"] == chat_prompt_tokens(llama, messages)
    timings = next(c["timings"] for c in reversed(chunks) if "timings" in c)
    # The OpenAI routes cache prompts by default: prompt_n counts only the uncached part.
    assert timings["predicted_n"] == 24
    assert timings["prompt_n"] + timings["cache_n"] == usage["prompt_tokens"]


def test_openai_completions_stream_usage(llama: LlamaServer):
    prompt = llama.prompt_of_length(100, seed=5)
    body = {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": 20,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    s = stream_post(llama.url, "/v1/completions", body)
    usage = s.payloads()[-1]["usage"]
    assert s.done_sentinel
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (100, 20)


def test_parallel_requests_batch_across_slots(llama: LlamaServer):
    results: list[Stream] = []
    lock = threading.Lock()
    start = threading.Barrier(SLOTS)
    prompts = [llama.prompt_of_length(50 + i, seed=10 + i) for i in range(SLOTS)]

    def one(i: int) -> None:
        start.wait(timeout=10)
        s = native(llama, prompts[i], 128)
        with lock:
            results.append(s)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(SLOTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == SLOTS
    finals = [r.events[-1][1] for r in results]
    assert sorted(f["id_slot"] for f in finals) == list(range(SLOTS))
    assert all(f["timings"]["predicted_n"] == 128 for f in finals)
    # Continuous batching: all four were decoding at one moment (the last first token came
    # before the first last token). 128 tokens take >100 ms; the starts differ by a few ms.
    assert max(r.events[0][0] for r in results) < min(r.events[-2][0] for r in results)
