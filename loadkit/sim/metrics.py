"""Prometheus ``/metrics`` text with each engine's own metric names.

Covered per engine: running and waiting requests, KV-cache usage, prefix-cache hits where the
engine exports them, token counters. Ollama has no Prometheus endpoint (404, as the real one).
TGI exports no KV usage or prefix-hit metric, so none is invented.
"""

from __future__ import annotations

from collections.abc import Callable

from loadkit.sim.engine import Scheduler

Metric = tuple[str, str, str, float]  # name, type, help, value


def _render(metrics: list[Metric], labels: str) -> bytes:
    out = []
    for name, kind, help_, value in metrics:
        base = name.split("{", 1)[0]
        lab = labels if "{" not in name else ""
        out.append(f"# HELP {base} {help_}\n# TYPE {base} {kind}\n{name}{lab} {_num(value)}\n")
    return "".join(out).encode()


def _label(value: str) -> str:
    """A label value as the exposition format escapes it (a model name may hold quotes)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _hit_rate(s: Scheduler) -> float:
    return s.pool.hits / s.pool.queries if s.pool.queries else 0.0


def vllm_metrics(s: Scheduler, model: str) -> bytes:
    c = s.counters
    return _render([
        ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", len(s.running)),
        ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", len(s.waiting)),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", s.pool.usage()),
        ("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.", s.pool.usage()),
        ("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", s.pool.queries),
        ("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", s.pool.hits),
        ("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", c.preemptions),
        ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt_tokens),
        ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", c.generation_tokens),
        ("vllm:request_success_total", "counter", "Count of successfully processed requests.", c.finished),
    ], f'{{engine="0",model_name="{_label(model)}"}}')  # fmt: skip


def sglang_metrics(s: Scheduler, model: str) -> bytes:
    c = s.counters
    return _render([
        ("sglang:num_running_reqs", "gauge", "The number of running requests.", len(s.running)),
        ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", len(s.waiting)),
        ("sglang:num_used_tokens", "gauge", "The number of used tokens.", s.pool.used() * s.pool.block_size),
        ("sglang:token_usage", "gauge", "The token usage.", s.pool.usage()),
        ("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", _hit_rate(s)),
        ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt_tokens),
        ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", c.generation_tokens),
        ("sglang:num_requests_total", "counter", "Number of requests processed.", c.finished),
    ], f'{{model_name="{_label(model)}"}}')  # fmt: skip


def tgi_metrics(s: Scheduler, model: str) -> bytes:
    c = s.counters
    return _render([
        ("tgi_batch_current_size", "gauge", "Current batch size", len(s.running)),
        ("tgi_queue_size", "gauge", "Current queue size", len(s.waiting)),
        ("tgi_batch_current_max_tokens", "gauge", "Maximum tokens for the current batch",
         sum(q.n_prompt + q.target_out for q in s.running)),
        ("tgi_request_count", "counter", "Total number of requests", c.finished + c.aborted + len(s.running) + len(s.waiting)),
        ("tgi_request_success", "counter", "Number of successful requests", c.finished),
    ], "")  # fmt: skip


def triton_metrics(s: Scheduler, model: str) -> bytes:
    pool = s.pool
    active = '{model="tensorrt_llm",request_type="active",version="1"}'
    sched = '{model="tensorrt_llm",request_type="scheduled",version="1"}'
    lines = [
        (
            "nv_trt_llm_request_metrics" + active,
            "gauge",
            "TRT LLM request metrics",
            len(s.running) + len(s.waiting),
        ),
        ("nv_trt_llm_request_metrics" + sched, "gauge", "TRT LLM request metrics", len(s.running)),
        (
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"}',
            "gauge",
            "TRT LLM KV cache block metrics",
            pool.num_blocks,
        ),
        (
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"}',
            "gauge",
            "TRT LLM KV cache block metrics",
            pool.used(),
        ),
        (
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="free",model="tensorrt_llm",version="1"}',
            "gauge",
            "TRT LLM KV cache block metrics",
            pool.available(),
        ),
        (
            'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"}',
            "gauge",
            "TRT LLM KV cache block metrics",
            pool.usage(),
        ),
        (
            f'nv_inference_pending_request_count{{model="{_label(model)}",version="1"}}',
            "gauge",
            "Instantaneous number of pending requests awaiting execution per-model.",
            len(s.waiting),
        ),
        (
            f'nv_inference_request_success{{model="{_label(model)}",version="1"}}',
            "counter",
            "Number of successful inference requests, all batch sizes",
            s.counters.finished,
        ),
    ]
    return _render_grouped(lines)


def _render_grouped(metrics: list[Metric]) -> bytes:
    """Like _render, but one HELP/TYPE per metric family even with several label sets."""
    out, seen = [], set()
    for name, kind, help_, value in metrics:
        base = name.split("{", 1)[0]
        if base not in seen:
            seen.add(base)
            out.append(f"# HELP {base} {help_}\n# TYPE {base} {kind}\n")
        out.append(f"{name} {_num(value)}\n")
    return "".join(out).encode()


def llamacpp_metrics(s: Scheduler, model: str) -> bytes:
    c = s.counters
    return _render([
        ("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens",
         c.prompt_tokens - c.cached_prompt_tokens),
        ("llamacpp:prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache",
         c.cached_prompt_tokens),
        ("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed", c.generation_tokens),
        ("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls", c.steps),
        ("llamacpp:requests_processing", "gauge", "Number of requests processing", len(s.running)),
        ("llamacpp:requests_deferred", "gauge", "Number of requests deferred", len(s.waiting)),
        ("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", s.pool.usage()),
    ], "")  # fmt: skip


METRICS: dict[str, Callable[[Scheduler, str], bytes]] = {
    "openai": vllm_metrics,
    "sglang": sglang_metrics,
    "tgi": tgi_metrics,
    "triton": triton_metrics,
    "llamacpp": llamacpp_metrics,
}
