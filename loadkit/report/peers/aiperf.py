"""AIPerf's ``profile_export_aiperf.json`` (``aiperf profile``'s summary), read as a loadkit report.

One engine, named ``aiperf``. AIPerf's statistics are over its valid (non-error) requests and
copied, not recomputed. Checked against AIPerf 0.13.0 (``schema_version`` 1.4); the definitions
below are from its source (its metric classes under ``aiperf/metrics/types/``, and ``aiperf/metrics/metric_dicts.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.report.peers.common import distribution, engine_section, peer_report, unmapped

TOOL = "aiperf"
EXPECTS = (
    "AIPerf profile_export_aiperf.json: top-level 'aiperf_version' or metric objects with 'unit' and 'avg'"
)

LATENCIES = {  # loadkit metric <- AIPerf metric (all in ms or tokens already)
    "ttft_ms": "time_to_first_token",
    "tpot_ms": "inter_token_latency",
    "itl_chunk_ms": "inter_chunk_latency",
    "e2e_ms": "request_latency",
    "n_in": "input_sequence_length",
    "n_out": "output_sequence_length",
}
SCALARS = ("request_count", "error_request_count", "completed_request_count", "benchmark_duration",
           "total_output_tokens", "total_isl", "request_throughput", "output_token_throughput")  # fmt: skip

DEFINITIONS = {
    "tpot_ms": "from AIPerf's inter_token_latency, (request_latency - TTFT) / (output tokens - 1) per request: "
    "loadkit's TPOT, except that AIPerf ends at the last response chunk (a usage-only chunk or the end of "
    "the stream can follow the last token), loadkit at the last token",
    "itl_chunk_ms": "from AIPerf's inter_chunk_latency: gaps between response chunks, one value per gap",
    "itl_ms": "not measured: AIPerf has no per-token gap distribution (inter_chunk_latency is per chunk)",
    "ttft_ms": "request start (taken before the connection is acquired: pool wait and connect included) to "
    "the first response chunk with content; loadkit's ttft_ms starts after the connect "
    "(its ttft_with_connect_ms is nearer AIPerf's)",
    "e2e_ms": "request_latency: request start to the last response chunk",
    "n_in / n_out": "AIPerf counts tokens with its --tokenizer by default (usage_* fields hold the server's "
    "counts); loadkit takes the server's usage",
    "percentiles": "AIPerf: linear interpolation between order statistics (numpy's default); loadkit: nearest rank "
    "on a log-linear histogram. No p999 in AIPerf (not measured)",
    "requests_per_s": "AIPerf's request_throughput: completed requests / benchmark_duration",
    "goodput_per_s": "not measured here: AIPerf's goodput needs --goodput, and its SLOs are not loadkit's",
}


def detect(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if "aiperf_version" in data:
        return True
    latency = data.get("request_latency")
    return isinstance(latency, dict) and "unit" in latency and "input_config" in data


def _avg(data: dict[str, Any], key: str) -> float | None:
    node = data.get(key)
    return float(node["avg"]) if isinstance(node, dict) and node.get("avg") is not None else None


def _dist(node: dict[str, Any] | None) -> dict[str, Any]:
    if not node:
        return distribution(0)
    return distribution(node.get("count"), 1.0, mean=node.get("avg"), min=node.get("min"), max=node.get("max"),
                        p50=node.get("p50"), p90=node.get("p90"), p95=node.get("p95"), p99=node.get("p99"))  # fmt: skip


def convert(data: dict[str, Any], path: Path) -> dict[str, Any]:
    ok = int(_avg(data, "request_count") or 0)
    errors = int(_avg(data, "error_request_count") or 0)
    latencies = {name: _dist(data.get(key)) for name, key in LATENCIES.items()}
    total_out, total_in = _avg(data, "total_output_tokens"), _avg(data, "total_isl")
    section = engine_section(
        requests=ok + errors, ok=ok, failures=errors, cancelled=0,
        outcomes={k: v for k, v in (("ok", ok), ("errored", errors)) if v},
        window_s=_avg(data, "benchmark_duration"),
        output_tokens=None if total_out is None else int(total_out),
        input_tokens=None if total_in is None else int(total_in),
        requests_per_s=_avg(data, "request_throughput"), output_tokens_per_s=_avg(data, "output_token_throughput"),
        latencies=latencies,
    )  # fmt: skip
    section["itl_chunk_ms"] = latencies["itl_chunk_ms"]
    config = data.get("input_config") or {}
    endpoint = config.get("endpoint") or {}
    models = [m.get("name") for m in (config.get("models") or {}).get("items", []) if isinstance(m, dict)]
    mapped = [*LATENCIES.values(), *SCALARS, "aiperf_version", "input_config.endpoint.urls",
              "input_config.models.items"]  # fmt: skip
    return peer_report(
        tool=TOOL, version=data.get("aiperf_version"), file=path, engines={TOOL: section},
        unmapped_paths=unmapped(data, mapped), definitions=DEFINITIONS, started_unix=None,
        target=(endpoint.get("urls") or [None])[0], model=", ".join(m for m in models if m) or None,
        load=_load(config),
    )  # fmt: skip


def _load(config: dict[str, Any]) -> str | None:
    phases = config.get("loadgen") or config.get("phases")
    return None if phases is None else str(phases)[:200]
