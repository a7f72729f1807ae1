"""report.json as llm-d *Benchmark Report* v0.2 documents, one per engine (``--target``).

llm-d-benchmark takes any load generator whose results arrive in its standard report
(schema: ``loadkit/report/schemas/br_v0_2_json_schema.json``, copied from llm-d-benchmark).
A Benchmark Report holds the results of one inference endpoint, so a run against several
targets gives one report each; ``run.eid`` ties them together. What maps, what does not and
where the definitions differ is in docs/llm-d.md; keep that page in step with this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loadkit.errors import UserError
from loadkit.report.llmdobserve import observability

SCHEMA_VERSION = "0.2"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "br_v0_2_json_schema.json"
# loadkit's summary keys → the schema's Statistics keys (loadkit has no p0.1 … p25, p75).
_STAT_KEYS = (("mean", "mean"), ("min", "min"), ("p50", "p50"), ("p90", "p90"), ("p95", "p95"),
              ("p99", "p99"), ("p999", "p99p9"), ("max", "max"))  # fmt: skip
# report.json metric (ms) → the schema's latency field and unit; loadkit reports seconds, as
# llm-d's own example and its GuideLLM converter do.
LATENCIES = (
    ("ttft_ms", "time_to_first_token", "s"),
    ("tpot_ms", "time_per_output_token", "s/token"),
    ("itl_ms", "inter_token_latency", "s/token"),
    ("e2e_ms", "request_latency", "s"),
)
# The scenario's length distributions (docs/scenarios.md) → the schema's Distribution enum.
# Every other family (lognormal, gamma, pareto, zipf, empirical, mixture) is "other".
_DISTRIBUTIONS = {"fixed": "fixed", "uniform": "uniform", "normal": "gaussian"}


class LlmdReportError(UserError):
    """report.json cannot be written as a Benchmark Report, or the result fails the schema."""


def statistics(summary: dict[str, Any] | None, units: str, scale: float = 1.0) -> dict[str, Any] | None:
    """A loadkit summary (``{count, mean, min, …}``) as a Statistics object; None when nothing
    was measured (the schema requires a mean, and loadkit never writes 0 for "not measured")."""
    if not summary or not summary.get("count") or summary.get("mean") is None:
        return None
    out: dict[str, Any] = {"units": units}
    for ours, theirs in _STAT_KEYS:
        value = summary.get(ours)
        if value is not None:
            out[theirs] = value / scale
    return out


def _rate(value: float | None, units: str) -> dict[str, Any] | None:
    # One rate over the engine's measured window: a mean without a distribution.
    return None if value is None else {"units": units, "mean": float(value)}


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix)) + f".{int(unix % 1 * 1e6):06d}Z"


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def run_section(report: dict[str, Any], engine: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``run``: ids, times, description. Inside an llm-d-benchmark harness pod the experiment
    id and the submitter's description and keywords come from its environment variables, as
    its own converters take them (eid = UUID5 of the experiment id in the URL namespace)."""
    env = os.environ if env is None else env
    m = report.get("manifest") or {}
    started, stopped = m.get("started_unix"), m.get("stopped_unix")
    experiment = env.get("LLMDBENCH_RUN_EXPERIMENT_ID", "").strip()
    # One experiment id per loadkit run, shared by its per-engine reports; uid unique per engine.
    host = (m.get("client") or {}).get("hostname")
    eid = str(uuid.uuid5(uuid.NAMESPACE_URL, experiment or f"loadkit-run:{started}:{host}"))
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{eid}:{engine}"))
    run_time = None
    if started is not None:
        duration = None if stopped is None else f"PT{max(0.0, stopped - started):.3f}S"
        run_time = _drop_none({"start": _iso(started), "end": _iso(stopped), "duration": duration})
    scenario = (m.get("scenario") or {}).get("name")
    model = _model(_target(m, engine))
    label = f"loadkit {scenario or 'run'} against {engine}" + (f" ({model})" if model else "")
    if experiment:
        label = f"{label} [{experiment}]"
    description = env.get("LLMDBENCH_DESCRIPTION_TEXT", "").strip() or label
    keywords = [k.strip() for k in env.get("LLMDBENCH_DESCRIPTION_KEYWORDS", "").split(",") if k.strip()]
    return _drop_none({"uid": uid, "eid": eid, "time": run_time, "description": description,
                       "keywords": keywords or None})  # fmt: skip


def _target(manifest: dict[str, Any], engine: str) -> dict[str, Any]:
    for t in manifest.get("targets") or []:
        if t.get("name") == engine:
            return dict(t)
    targets = manifest.get("targets") or []
    return dict(targets[0]) if len(targets) == 1 else {"name": engine}


def _model(target: dict[str, Any]) -> str | None:
    server = target.get("server") or {}
    return server.get("model") or target.get("model_requested") or None


def component(target: dict[str, Any]) -> dict[str, Any]:
    """The target as a ``generic`` stack component: a client knows the endpoint, the engine
    family and what the server says about itself, not the accelerators, replicas or
    parallelism that the schema's ``inference_engine`` kind requires."""
    server = target.get("server") or {}
    standardized = _drop_none({
        "kind": "generic",
        "tool": str(server.get("engine") or target.get("engine") or "unknown"),
        "tool_version": str(server.get("version") or "unknown"),
        "model": {"name": _model(target)} if _model(target) else None,
        "url": target.get("url"),
        "api": target.get("api"),
    })  # fmt: skip
    metadata = {"schema_version": "0.0.1", "label": str(target.get("name") or "target"),
                "cfg_id": _hash(target), "description": target.get("url")}  # fmt: skip
    return {"metadata": _drop_none(metadata), "standardized": standardized, "native": {"config": target}}


def _source(manifest: dict[str, Any]) -> str:
    asked = (manifest.get("scenario") or {}).get("lengths_asked") or {}
    if "trace" in asked:
        return "sampled"  # lengths and arrivals from a recorded trace
    return "random" if asked else "unknown"


def sequence_length(asked: Any, realised: dict[str, Any] | None) -> dict[str, Any]:
    """A scenario length spec (``{dist, value|low,high|mean,std}``) when the workload has one
    simple distribution; otherwise ``other`` with the realised mean, min and max."""
    if isinstance(asked, int | float) and not isinstance(asked, bool) and asked >= 0:
        return {"distribution": "fixed", "value": asked}  # a bare number is a fixed length
    if isinstance(asked, dict) and _DISTRIBUTIONS.get(str(asked.get("dist"))):
        dist = _DISTRIBUTIONS[str(asked["dist"])]
        if dist == "fixed" and asked.get("value") is not None:
            return {"distribution": dist, "value": asked["value"]}
        if dist == "uniform" and asked.get("low") is not None and asked.get("high") is not None:
            low, high = int(asked["low"]), int(asked["high"])
            return {"distribution": dist, "value": (low + high) / 2, "min": max(0, low), "max": max(1, high)}
        if dist == "gaussian" and asked.get("mean") is not None:
            return _drop_none({"distribution": dist, "value": asked["mean"], "std_dev": asked.get("std")})
    out: dict[str, Any] = {"distribution": "other", "value": 0}
    if realised and realised.get("count"):
        out["value"] = realised["mean"]
        if realised.get("min") is not None:
            out["min"] = max(0, int(realised["min"]))
        if realised.get("max") is not None and realised["max"] >= 1:
            out["max"] = int(realised["max"])
    return out


def load_section(report: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    m = report.get("manifest") or {}
    scenario = m.get("scenario") or {}
    parts = ((scenario.get("lengths_asked") or {}).get("parts")) or {}
    only = next(iter(parts.values())) if len(parts) == 1 else {}
    arrival: dict[str, Any] = scenario["arrival"] if isinstance(scenario.get("arrival"), dict) else {}
    from loadkit import __version__

    standardized = _drop_none({
        "tool": "loadkit",
        "tool_version": str(m.get("loadkit_version") or __version__),
        "parallelism": max(1, int(m.get("workers") or 1)),
        "source": _source(m),
        "stage": 0,
        "input_seq_len": sequence_length(only.get("input"), section.get("n_in")),
        "output_seq_len": sequence_length(only.get("output"), section.get("n_out")),
        "rate_qps": _positive(arrival.get("rate")) if m.get("open_loop") else None,
        # Closed loop: the users the run started (-u), else the scenario's.
        "concurrency": None if m.get("open_loop") else _at_least_one(m.get("users") or arrival.get("users")),
    })  # fmt: skip
    native_keys = ("scenario", "users", "spawn_rate", "run_time", "open_loop", "timeouts", "workers", "shape")
    native = {k: m[k] for k in native_keys if m.get(k) is not None}
    metadata = _drop_none({"schema_version": "0.0.1", "cfg_id": scenario.get("sha256") or _hash(native),
                           "description": scenario.get("name")})  # fmt: skip
    return {"metadata": metadata, "standardized": standardized, "native": {"config": native}}


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _at_least_one(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and value >= 1 else None


def request_performance(section: dict[str, Any]) -> dict[str, Any]:
    requests = _drop_none({
        "total": int(section.get("requests") or 0),
        "failures": int(section.get("failures") or 0),
        # Requests the test stopped (loadkit's `cancelled`): sent, never completed.
        "incomplete": int(section.get("cancelled") or 0),
        "input_length": statistics(section.get("n_in"), "count"),
        "output_length": statistics(section.get("n_out"), "count"),
    })  # fmt: skip
    latency = _drop_none({name: statistics(section.get(key), units, 1e3) for key, name, units in LATENCIES})
    window = section.get("window_s")
    in_rate = section["input_tokens"] / window if window and section.get("input_tokens") is not None else None
    out_rate = section.get("output_tokens_per_s")
    total_rate = None if in_rate is None or out_rate is None else in_rate + out_rate
    throughput = _drop_none({
        "input_token_rate": _rate(in_rate, "tokens/s"),
        "output_token_rate": _rate(out_rate, "tokens/s"),
        "total_token_rate": _rate(total_rate, "tokens/s"),
        "request_rate": _rate(section.get("requests_per_s"), "queries/s"),
    })  # fmt: skip
    aggregate = _drop_none(
        {"requests": requests, "latency": latency or None, "throughput": throughput or None}
    )
    return {"aggregate": aggregate}


def time_series(section: dict[str, Any]) -> dict[str, Any] | None:
    """report.json's per-second rows as throughput series: requests and output tokens of the
    requests that *finished* in each wall-clock second (a request's tokens count at its end)."""
    cols = section.get("timeseries") or {}
    seconds = cols.get("unix") or []
    if not seconds:
        return None

    def series(key: str, units: str) -> dict[str, Any]:
        points = [{"ts": _iso(float(t)), "value": v} for t, v in zip(seconds, cols[key], strict=True)]
        return {"units": units, "series": points}

    return {"throughput": {"request_rate": series("requests", "queries/s"),
                           "output_token_rate": series("output_tokens", "tokens/s")}}  # fmt: skip


def benchmark_report(report: dict[str, Any], engine: str) -> dict[str, Any]:
    """One engine's part of report.json as a Benchmark Report v0.2 document."""
    engines = report.get("engines") or {}
    if engine not in engines:
        raise LlmdReportError(f"report.json: no engine {engine!r} (engines: {', '.join(engines) or 'none'})")
    section = engines[engine]
    manifest = report.get("manifest") or {}
    return {
        "version": SCHEMA_VERSION,
        "run": run_section(report, engine),
        "scenario": {"stack": [component(_target(manifest, engine))], "load": load_section(report, section)},
        "results": _drop_none(
            {
                "request_performance": _drop_none(
                    {**request_performance(section), "time_series": time_series(section)}
                ),
                "observability": observability(report, engine),
            }
        ),
    }


def benchmark_reports(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """engine → its Benchmark Report, for every engine in report.json."""
    if not (report.get("engines") or {}):
        raise LlmdReportError("report.json: no engines (did the run send any request?)")
    return {engine: benchmark_report(report, engine) for engine in report["engines"]}


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def schema_errors(document: dict[str, Any], schema: dict[str, Any] | None = None) -> list[str] | None:
    """Every way ``document`` breaks the schema (``path: message``), [] when it is valid, None
    when the ``jsonschema`` package is not installed (the check is then skipped)."""
    try:
        import jsonschema
    except ImportError:
        return None
    from jsonschema.exceptions import best_match

    validator = jsonschema.Draft202012Validator(schema or load_schema())
    out = []
    for error in validator.iter_errors(document):
        # Most fields are `anyOf: [X, null]`: name the failure inside X, not "not valid under any".
        leaf = best_match([error]) or error
        where = ".".join(str(p) for p in leaf.absolute_path) or "(top)"
        message = leaf.message if len(leaf.message) <= 200 else leaf.message[:200] + "…"
        out.append(f"{where}: {message}")
    return sorted(out)


# What llm-d-benchmark's pydantic models check beyond the JSON Schema: each aggregate figure's
# unit category (a TTFT in tokens/s passes the schema's unit enum, not its model).
_TIME, _PER_TOKEN = ("ms", "s"), ("ms/token", "s/token")
UNIT_RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "requests": {"input_length": ("count",), "output_length": ("count",)},
    "latency": {"time_to_first_token": _TIME, "normalized_time_per_output_token": _PER_TOKEN,
                "time_per_output_token": _PER_TOKEN, "inter_token_latency": _PER_TOKEN, "request_latency": _TIME},
    "throughput": {"input_token_rate": ("tokens/s",), "output_token_rate": ("tokens/s",),
                   "total_token_rate": ("tokens/s",), "request_rate": ("queries/s",)},
}  # fmt: skip


def model_rule_errors(document: dict[str, Any]) -> list[str]:
    """Violations of the rules llm-d-benchmark's models add to the schema: unit categories, and
    a concurrency that is an integer (or infinite)."""
    errors = []
    aggregate = ((document.get("results") or {}).get("request_performance") or {}).get("aggregate") or {}
    for group, fields in UNIT_RULES.items():
        for name, allowed in fields.items():
            units = ((aggregate.get(group) or {}).get(name) or {}).get("units")
            if units is not None and units not in allowed:
                where = f"results.request_performance.aggregate.{group}.{name}.units"
                errors.append(f"{where}: {units!r} is not one of {list(allowed)}")
    load = ((document.get("scenario") or {}).get("load") or {}).get("standardized") or {}
    concurrency = load.get("concurrency")
    if isinstance(concurrency, float) and concurrency != float("inf"):
        errors.append(f"scenario.load.standardized.concurrency: {concurrency!r} is not an integer")
    return errors


def check(document: dict[str, Any], where: str) -> None:
    """Raise naming the first few violations; nothing when valid. The schema is checked when
    ``jsonschema`` is installed, the models' extra rules always."""
    errors = (schema_errors(document) or []) + model_rule_errors(document)
    if errors:
        shown = "; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else "")
        raise LlmdReportError(f"{where}: not a valid Benchmark Report v{SCHEMA_VERSION}: {shown}")
