"""genai-bench's results (``genai-bench benchmark``'s experiment folder), read as a loadkit report.

genai-bench writes, per experiment folder, ``experiment_metadata.json`` (the command, its
version, the scenarios and concurrencies) and one JSON file per run (a traffic scenario at one
concurrency): ``aggregated_metrics`` (with ``stats`` per metric) and
``individual_request_metrics``. Either file can be given: a run file becomes one engine; the
metadata file becomes one engine per run file beside it. The version is read from the metadata
file (a run file does not record it). Checked against genai-bench 0.0.5; the definitions below
are from its source (``genai_bench/metrics/request_metrics_collector.py``,
``genai_bench/metrics/aggregated_metrics_collector.py``, ``genai_bench/user/openai_user.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from loadkit.report.peers.common import PeerFormatError, distribution, engine_section, peer_report, unmapped

TOOL = "genai-bench"
EXPECTS = (
    "genai-bench run file (top-level 'aggregated_metrics' with 'stats', and 'individual_request_metrics') "
    "or its experiment_metadata.json ('benchmark_version', 'traffic_scenario')"
)
METADATA = "experiment_metadata.json"

# loadkit metric <- genai-bench stats field; latencies are in the file's _time_unit
LATENCIES = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2e_ms": "e2e_latency"}
TOKENS = {"n_in": "num_input_tokens", "n_out": "num_output_tokens"}
STATS = ("mean", "min", "max", "p50", "p90", "p95", "p99")
SCALARS = ("num_requests", "num_completed_requests", "num_error_requests", "run_duration", "requests_per_second",
           "mean_output_throughput_tokens_per_s", "scenario", "num_concurrency", "iteration_type")  # fmt: skip

DEFINITIONS = {
    "ttft_ms": "time.monotonic() before requests.post (connect included) to the first chunk with content; "
    "loadkit's ttft_ms starts after the connect (its ttft_with_connect_ms is nearer)",
    "tpot_ms": "(e2e_latency - TTFT) / (output tokens - 1) per request: loadkit's formula, but e2e ends at the "
    "stream's end (the usage chunk, [DONE]) rather than the last token, and a request whose output latency is "
    "under 1 ms is dropped from it",
    "output_inference_speed (unmapped)": "1 / TPOT per request, in tokens/s: its mean is not 1 / mean TPOT",
    "output_throughput (unmapped)": "per request, (output tokens - 1) / (e2e - TTFT): a per-request decode speed, "
    "not loadkit's run-wide output_tokens_per_s",
    "e2e_ms": "e2e_latency: request start to the end of the stream",
    "itl_ms": "not measured: genai-bench keeps no per-gap inter-token distribution",
    "n_in / n_out": "the server's usage (prompt_tokens, completion_tokens); if the server sends none, genai-bench "
    "estimates with its tokenizer",
    "percentiles": "numpy's default, linear interpolation between order statistics, over the requests without "
    "an error (after the warm-up / cool-down ratios); loadkit: nearest rank on a log-linear histogram. No p99.9 "
    "in the file (not measured); its p25 and p75 are unmapped",
    "requests_per_s": "genai-bench's requests_per_second: completed requests / run_duration",
    "output_tokens_per_s": "genai-bench's mean_output_throughput_tokens_per_s: despite the name, the run's total "
    "output tokens / run_duration (the run's wall time, ramp-up included)",
    "goodput_per_s": "not measured: no loadkit SLOs in a genai-bench run",
}


def _is_run(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("aggregated_metrics"), dict)
            and "stats" in data["aggregated_metrics"] and "individual_request_metrics" in data)  # fmt: skip


def _is_metadata(data: Any) -> bool:
    return isinstance(data, dict) and "benchmark_version" in data and "traffic_scenario" in data


def detect(data: Any) -> bool:
    return _is_run(data) or _is_metadata(data)


def _scale(data: dict[str, Any], path: Path) -> float:
    unit = data.get("_time_unit", "s")  # genai-bench's default unit, and what files before the key held
    if unit not in ("s", "ms"):
        raise PeerFormatError(f"{path}: _time_unit {unit!r}: expected 's' or 'ms'")
    return 1000.0 if unit == "s" else 1.0


def _count(requests: list[dict[str, Any]], field: str) -> int:
    return sum(1 for r in requests if not r.get("error_code") and r.get(field) is not None)


def _section(data: dict[str, Any], path: Path) -> tuple[dict[str, Any], list[str]]:
    agg = data["aggregated_metrics"]
    stats, requests = agg["stats"], data["individual_request_metrics"]
    scale = _scale(data, path)
    fields = {**{k: (v, scale) for k, v in LATENCIES.items()}, **{k: (v, 1.0) for k, v in TOKENS.items()}}
    latencies = {
        name: distribution(
            _count(requests, field), factor, **{s: (stats.get(field) or {}).get(s) for s in STATS}
        )
        for name, (field, factor) in fields.items()
    }
    ok, errors = int(agg["num_completed_requests"]), int(agg["num_error_requests"])
    total_out, total_in = (
        (stats.get("num_output_tokens") or {}).get("sum"),
        (stats.get("num_input_tokens") or {}).get("sum"),
    )
    section = engine_section(
        requests=int(agg["num_requests"]), ok=ok, failures=errors, cancelled=0,
        outcomes={k: v for k, v in (("ok", ok), ("errored", errors)) if v},
        window_s=float(agg["run_duration"]), output_tokens=None if total_out is None else int(total_out),
        input_tokens=None if total_in is None else int(total_in),
        requests_per_s=float(agg["requests_per_second"]),
        output_tokens_per_s=float(agg["mean_output_throughput_tokens_per_s"]), latencies=latencies,
    )  # fmt: skip
    mapped = [f"aggregated_metrics.{k}" for k in SCALARS]
    mapped += [f"aggregated_metrics.stats.{field}.{s}" for field, _ in fields.values() for s in STATS]
    mapped += [
        "aggregated_metrics.stats.num_output_tokens.sum",
        "aggregated_metrics.stats.num_input_tokens.sum",
    ]
    # per-request records: only counted (the distributions' counts), summarised by the stats above
    mapped += ["individual_request_metrics", "_time_unit"]
    return section, mapped


def _engine_name(agg: dict[str, Any], count: int) -> str:
    if count == 1:
        return TOOL
    kind = agg.get("iteration_type") or "num_concurrency"
    return f"{TOOL}[{agg.get('scenario')}] {kind}={agg.get(kind)}"


def _runs_beside(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    runs = []
    for file in sorted(path.parent.glob("*.json")):
        if file.name == METADATA:
            continue
        try:
            data = orjson.loads(file.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise PeerFormatError(f"{file}: a genai-bench run file that cannot be read: {exc}") from None
        if _is_run(data):
            runs.append((file, data))
    if not runs:
        raise PeerFormatError(f"{path}: genai-bench's experiment metadata, but no run file (with "
                              f"'aggregated_metrics') beside it in {path.parent}")  # fmt: skip
    return runs


def _metadata_beside(path: Path) -> dict[str, Any]:
    file = path.parent / METADATA
    try:
        data = orjson.loads(file.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if _is_metadata(data) else {}


def convert(data: dict[str, Any], path: Path) -> dict[str, Any]:
    if _is_metadata(data):
        meta, runs = data, _runs_beside(path)
    else:
        meta, runs = _metadata_beside(path), [(path, data)]
    engines: dict[str, dict[str, Any]] = {}
    unmapped_paths: list[str] = []
    for file, run in runs:
        section, mapped = _section(run, file)
        engines[_engine_name(run["aggregated_metrics"], len(runs))] = section
        prefix = "" if len(runs) == 1 else f"{file.name}:"
        unmapped_paths += [prefix + p for p in unmapped(run, mapped)]
    if meta:
        used = ["benchmark_version", "api_model_name", "traffic_scenario", "num_concurrency"]
        unmapped_paths += [f"{METADATA}:{p}" for p in unmapped(meta, used)]
    first = runs[0][1]["aggregated_metrics"]
    scenarios = meta.get("traffic_scenario") or [first.get("scenario")]
    levels = meta.get(first.get("iteration_type") or "num_concurrency") or [first.get("num_concurrency")]
    return peer_report(
        tool=TOOL, version=meta.get("benchmark_version"), file=path, engines=engines,
        unmapped_paths=unmapped_paths, definitions=DEFINITIONS,
        model=meta.get("api_model_name"),
        load=f"traffic scenario {', '.join(map(str, scenarios))}, {first.get('iteration_type') or 'num_concurrency'} "
        f"{', '.join(map(str, levels))}",
    )  # fmt: skip
