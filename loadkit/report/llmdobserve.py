"""The scraped server metrics (report.json ``manifest.server_metrics``) as the Benchmark
Report's ``results.observability``: per target, statistics over its scrape samples."""

from __future__ import annotations

import math
from typing import Any

from loadkit.report.gpu import llmd_resources

# loadkit's neutral metric name (loadkit/servers/metrics.py) → (ResourceMetrics field, unit,
# scale). Gauges only: a statistic over samples of a counter (preemptions, prefix-cache hits)
# or of a since-start ratio would mean nothing.
GAUGES = (
    ("kv_usage", "kv_cache_usage", "percent", 100.0),
    ("running", "running_requests", "count", 1.0),
    ("waiting", "waiting_requests", "count", 1.0),
)
_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def sample_statistics(values: list[float], units: str) -> dict[str, Any]:
    """Mean, min, max and nearest-rank percentiles (rank ⌈q·n⌉) of the samples, exact."""
    ordered = sorted(values)
    out: dict[str, Any] = {"units": units, "mean": math.fsum(ordered) / len(ordered),
                           "min": ordered[0], "max": ordered[-1]}  # fmt: skip
    for key, q in _QUANTILES:
        out[key] = ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    return out


def component_observability(label: str, scrapes: dict[str, Any] | None) -> dict[str, Any] | None:
    samples = [s for s in (scrapes or {}).get("samples") or [] if isinstance(s, dict) and not s.get("error")]
    aggregate = {}
    for ours, theirs, units, scale in GAUGES:
        values = [float(v) * scale for s in samples
                  if isinstance(v := (s.get("values") or {}).get(ours), int | float) and math.isfinite(v)]  # fmt: skip
        if values:
            aggregate[theirs] = sample_statistics(values, units)
    return {"component_label": label, "aggregate": aggregate} if aggregate else None


def observability(report: dict[str, Any], engine: str) -> dict[str, Any] | None:
    """``{"components": [...]}`` for the target's stack component; None without a scrape."""
    metrics = (report.get("manifest") or {}).get("server_metrics") or {}
    component = component_observability(engine, metrics.get(engine) if isinstance(metrics, dict) else None)
    gpu = llmd_resources(report, engine)  # GPU power, utilisation, memory (report/gpu.py)
    if gpu:
        component = component or {"component_label": engine, "aggregate": {}}
        component["aggregate"].update(gpu)
    return None if component is None else {"components": [component]}
