"""vLLM's ``vllm bench serve --save-result`` JSON, read as a loadkit report.

One file is one run, one engine named ``vllm``. The figures are the file's own (numpy over the
completed requests), copied, not recomputed; with ``--save-detailed`` the per-request lists give
the exact TPOT and ITL counts. Checked against vLLM 0.33.0 (the file records no version); the
definitions below are from its source (``vllm/benchmarks/serve.py`` ``calculate_metrics``,
``vllm/benchmarks/lib/endpoint_request_func.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.report.peers.benchserve import section
from loadkit.report.peers.common import peer_report, unmapped

TOOL = "vllm"
EXPECTS = "vLLM bench serve --save-result JSON: top-level 'model_id', 'tokenizer_id' and 'mean_ttft_ms'"

DEFINITIONS = {
    "ttft_ms": "request start (perf_counter before aiohttp's post: pool wait and connect included) to the first "
    "chunk with streamed output; loadkit's ttft_ms starts after the connect (its ttft_with_connect_ms is nearer)",
    "tpot_ms": "(latency - TTFT) / (output tokens - 1) per request, the first token excluded and one-token "
    "answers left out; output tokens are the server's usage.completion_tokens: loadkit's formula, both ending "
    "at the last token chunk",
    "itl_ms": "one value per streamed chunk after the first (a chunk of several tokens is one gap, not split); "
    "loadkit's itl_ms is per token gap, so they agree only when each chunk carries one token",
    "e2e_ms": "vLLM's e2el: request start to the last chunk with a token (the usage chunk and [DONE] excluded)",
    "n_in / n_out": "only means (total / completed): the file has totals and per-request lists, not distributions; "
    "both from the server's usage (prompt_tokens, completion_tokens), its --tokenizer only where none is sent",
    "percentiles": "numpy's default, linear interpolation between order statistics (the --metric-percentiles "
    "asked for: 50, 90, 99 here), which can give a value no request had; loadkit: nearest rank on a log-linear "
    "histogram. No min or max, and no p95 / p99.9 unless asked for (not measured)",
    "requests_per_s": "vLLM's request_throughput: completed requests / the whole benchmark's duration",
    "output_tokens_per_s": "vLLM's output_throughput: the completed requests' output tokens / duration",
    "outcomes": "completed -> ok, failed -> errored",
    "version": "the file does not record vLLM's version",
    "goodput_per_s": "not measured: vLLM's request_goodput needs --goodput, and its SLOs are not loadkit's",
}


def detect(data: Any) -> bool:
    return isinstance(data, dict) and {"model_id", "tokenizer_id", "mean_ttft_ms"} <= data.keys()


def convert(data: dict[str, Any], path: Path) -> dict[str, Any]:
    engine, used = section(data, e2e="e2el", failed=int(data["failed"]))
    mapped = [*used, "failed", "model_id"]
    return peer_report(
        tool=TOOL, version=None, file=path, engines={TOOL: engine},
        unmapped_paths=unmapped(data, mapped), definitions=DEFINITIONS, model=data.get("model_id"),
        load=f"backend {data.get('backend')}, max_concurrency {data.get('max_concurrency')}, "
        f"request_rate {data.get('request_rate')}, {data.get('num_prompts')} prompts",
    )  # fmt: skip
