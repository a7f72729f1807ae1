"""GuideLLM's ``benchmarks.json`` (``guidellm run --output kind=json``), read as a loadkit report.

Each benchmark of the file (one per profile step: ``concurrent@2``, a sweep's rates ...)
becomes one engine; the statistics are GuideLLM's own over its ``successful`` requests (loadkit's
latencies are over ``ok`` requests too), copied, not recomputed. Checked against GuideLLM 0.8.1
(file ``metadata.version`` 2); the figures' definitions below are from its source
(``guidellm/schemas/base/request_stats.py``, ``schemas/base/statistics.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.report.peers.common import distribution, engine_section, peer_report, unmapped

TOOL = "guidellm"
EXPECTS = "GuideLLM benchmarks.json: top-level 'benchmarks' list of 'generative_benchmark' objects"

# loadkit metric <- GuideLLM metric (under benchmarks[i].metrics), and the unit factor to ms.
LATENCIES = {
    "ttft_ms": ("time_to_first_token_ms", 1.0),
    "tpot_ms": ("inter_token_latency_ms", 1.0),
    "e2e_ms": ("request_latency", 1000.0),
    "n_in": ("prompt_token_count", 1.0),
    "n_out": ("output_token_count", 1.0),
}
RATES = {"requests_per_s": "requests_per_second", "output_tokens_per_s": "output_tokens_per_second"}

DEFINITIONS = {
    "tpot_ms": "from GuideLLM's inter_token_latency_ms, (last token - first token) / (output tokens - 1) per "
    "request, loadkit's TPOT formula; but its distribution weights each request by its output tokens - 1 "
    "(count = tokens, not requests), so percentiles lean to long answers",
    "time_per_output_token_ms (unmapped)": "GuideLLM's TPOT is (last token - request start) / output tokens: "
    "it includes the time to first token, so it is not loadkit's tpot_ms and is left out",
    "ttft_ms": "request start to the first token iteration; GuideLLM's HTTP backend takes request start when "
    "the request headers start to go out (after any connect), as loadkit's ttft_ms does",
    "e2e_ms": "request_latency (seconds, x1000): request start to request end",
    "itl_ms": "not measured: GuideLLM keeps no per-gap inter-token distribution",
    "percentiles": "GuideLLM: nearest rank on the exact values (searchsorted on the CDF); loadkit: nearest rank "
    "on a log-linear histogram (bucket midpoints), so the two can differ by one bucket",
    "requests_per_s": "GuideLLM's requests_per_second.total.mean: the mean of its per-interval completion rate",
    "output_tokens_per_s": "GuideLLM's output_tokens_per_second.total.mean, incomplete requests' tokens included",
    "outcomes": "successful -> ok, incomplete (cancelled at the end of the run) -> cancelled, errored -> errored",
    "goodput_per_s": "not measured: no loadkit SLOs in a GuideLLM run",
}


def detect(data: Any) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return False
    meta = data.get("metadata")
    if isinstance(meta, dict) and "guidellm_version" in meta:
        return True
    first = data["benchmarks"][0] if data["benchmarks"] else None
    return isinstance(first, dict) and str(first.get("type_", "")).startswith("generative")


def _dist(summary: dict[str, Any] | None, scale: float) -> dict[str, Any]:
    if not summary:
        return distribution(0)
    pct = summary.get("percentiles") or {}
    return distribution(summary.get("count"), scale, mean=summary.get("mean"), min=summary.get("min"),
                        max=summary.get("max"), p50=pct.get("p50"), p90=pct.get("p90"), p95=pct.get("p95"),
                        p99=pct.get("p99"), p999=pct.get("p999"))  # fmt: skip


def _engine_name(bench: dict[str, Any], index: int, count: int) -> str:
    if count == 1:
        return TOOL
    strategy = (bench.get("config") or {}).get("strategy") or {}
    kind = strategy.get("type_", "benchmark")
    level = strategy.get("streams") or strategy.get("rate")
    return f"{TOOL}[{index}] {kind}" + (f"@{level}" if level is not None else "")


def _section(bench: dict[str, Any]) -> dict[str, Any]:
    metrics = bench["metrics"]
    totals = metrics["request_totals"]
    ok, errored, incomplete = int(totals["successful"]), int(totals["errored"]), int(totals["incomplete"])
    latencies = {name: _dist((metrics.get(key) or {}).get("successful"), scale)
                 for name, (key, scale) in LATENCIES.items()}  # fmt: skip
    rates = {name: ((metrics.get(key) or {}).get("total") or {}).get("mean") for name, key in RATES.items()}
    outcomes = {k: v for k, v in (("ok", ok), ("errored", errored), ("cancelled", incomplete)) if v}
    return engine_section(
        requests=ok + errored + incomplete, ok=ok, failures=errored, cancelled=incomplete, outcomes=outcomes,
        window_s=bench.get("duration"),
        output_tokens=_total(metrics.get("output_token_count")), input_tokens=_total(metrics.get("prompt_token_count")),
        requests_per_s=rates["requests_per_s"], output_tokens_per_s=rates["output_tokens_per_s"],
        latencies=latencies,
    )  # fmt: skip


def _total(summary: dict[str, Any] | None) -> int | None:
    value = ((summary or {}).get("successful") or {}).get("total_sum")
    return None if value is None else int(value)


def mapped_paths(index: int) -> list[str]:
    b = f"benchmarks[{index}]"
    out = [f"{b}.metrics.request_totals", f"{b}.duration", f"{b}.config.strategy", f"{b}.start_time"]
    out += [f"{b}.metrics.{key}.successful" for key, _ in LATENCIES.values()]
    out += [f"{b}.metrics.{key}.total.mean" for key in RATES.values()]
    out += [f"{b}.metrics.output_token_count.successful", f"{b}.metrics.prompt_token_count.successful"]
    # per-request records: summarised by the metrics above, not copied
    out += [
        f"{b}.requests",
        "metadata.guidellm_version",
        "config.spec.backend.target",
        "config.spec.backend.model",
    ]
    return out


def convert(data: dict[str, Any], path: Path) -> dict[str, Any]:
    benches = data["benchmarks"]
    engines = {_engine_name(b, i, len(benches)): _section(b) for i, b in enumerate(benches)}
    mapped = [p for i in range(len(benches)) for p in mapped_paths(i)]
    backend = ((data.get("config") or {}).get("spec") or {}).get("backend") or {}
    first = benches[0] if benches else {}
    strategy = (first.get("config") or {}).get("strategy") or {}
    return peer_report(
        tool=TOOL, version=(data.get("metadata") or {}).get("guidellm_version"), file=path, engines=engines,
        unmapped_paths=unmapped(data, mapped), definitions=DEFINITIONS, started_unix=first.get("start_time"),
        target=backend.get("target"), model=backend.get("model"),
        load=", ".join(f"{k} {v}" for k, v in strategy.items()) or None,
    )  # fmt: skip
