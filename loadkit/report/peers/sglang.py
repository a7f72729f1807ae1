"""SGLang's ``python -m sglang.bench_serving --output-file`` JSONL, read as a loadkit report.

bench_serving appends one JSON line per run to its output file, so a file can hold several runs
(a sweep of request rates or concurrencies): each line becomes one engine. The figures are the
file's own (numpy over the completed requests), copied, not recomputed; with ``--output-details``
the per-request lists (``errors``, ``itls``, ``output_lens``) give the exact counts. Checked
against SGLang 0.5.23; the definitions below are from its ``sglang/benchmark/serving.py``
(``calculate_metrics`` and the ``async_request_*`` functions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.report.peers.benchserve import failed_from_errors, section
from loadkit.report.peers.common import peer_report, unmapped

TOOL = "sglang"
EXPECTS = "SGLang bench_serving --output-file JSONL: lines with 'total_output_tokens_retokenized' and 'median_ttft_ms'"


DEFINITIONS = {
    "ttft_ms": "request start (perf_counter before aiohttp's post: pool wait and connect included) to the first "
    "chunk with text; loadkit's ttft_ms starts after the connect (its ttft_with_connect_ms is nearer)",
    "tpot_ms": "(latency - TTFT) / (output tokens - 1) per request, requests of one token left out: loadkit's "
    "formula, but SGLang's latency ends at the last chunk read (the stream's end), loadkit's at the last token",
    "itl_ms": "per gap between chunks with new tokens, the first token's excluded; the native /generate backend "
    "splits a chunk's gap evenly over the tokens it brought, the OpenAI backends give one value per chunk",
    "e2e_ms": "request start to the last chunk read",
    "n_in / n_out": "only means (total / completed): the file has totals and, with --output-details, per-request "
    "lists, not distributions; output tokens are the server's completion_tokens (the retokenized total is "
    "unmapped), input tokens the prompt lengths its dataset built, counted by its --tokenizer, not the server's",
    "percentiles": "numpy's default, linear interpolation between order statistics, which can give a value no "
    "request had; loadkit: nearest rank on a log-linear histogram. No min, max or p99.9 in the file (not measured)",
    "requests_per_s": "SGLang's request_throughput: completed requests / the whole benchmark's duration",
    "output_tokens_per_s": "SGLang's output_throughput: the completed requests' output tokens / duration",
    "outcomes": "a request with a non-empty 'errors' entry -> errored; without --output-details the file holds "
    "only 'completed', and failed requests are not counted",
    "version": "the file does not record bench_serving's version (server_info is the server's)",
    "goodput_per_s": "not measured: SGLang's goodput needs its own SLO options, not loadkit's",
}


def _lines(data: Any) -> list[dict[str, Any]] | None:
    lines = data if isinstance(data, list) else [data]
    return lines if lines and all(isinstance(x, dict) for x in lines) else None


def detect(data: Any) -> bool:
    lines = _lines(data)
    return bool(lines) and all(
        "total_output_tokens_retokenized" in x and "median_ttft_ms" in x for x in lines or []
    )


def _engine_name(run: dict[str, Any], index: int, count: int) -> str:
    if count == 1:
        return TOOL
    return f"{TOOL}[{index}] rate={run.get('request_rate')} concurrency={run.get('max_concurrency')}"


def convert(data: Any, path: Path) -> dict[str, Any]:
    runs = _lines(data) or []
    engines: dict[str, dict[str, Any]] = {}
    mapped: list[str] = []
    for i, run in enumerate(runs):
        engine, used = section(run, e2e="e2e_latency", failed=failed_from_errors(run))
        engines[_engine_name(run, i, len(runs))] = engine
        prefix = f"[{i}]." if isinstance(data, list) else ""
        mapped += [prefix + key for key in used]
    first = runs[0]
    server = first.get("server_info") or {}
    return peer_report(
        tool=TOOL, version=None, file=path, engines=engines,
        unmapped_paths=unmapped(data, mapped), definitions=DEFINITIONS,
        model=server.get("model_path") if isinstance(server, dict) else None,
        load=f"backend {first.get('backend')}, max_concurrency {first.get('max_concurrency')}, "
        f"request_rate {first.get('request_rate')}, dataset {first.get('dataset_name')}",
    )  # fmt: skip
