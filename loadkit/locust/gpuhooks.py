"""The GPU telemetry's start and stop on the reporting node (called from locust/listeners.py).

The samples reach the report through a manifest provider (``gpu_samples``), read at each report
the collector builds. After the test stops, each report first reads the GPUs once more: a
distributed run's last requests end on the workers after the master's stop, and the final
report, built once their finals are in, then has a sample after the window's end to read the
energy counter at (docs/gpu.md).
"""

from __future__ import annotations

import logging
from typing import Any

from loadkit.locust.gpuscraping import GpuMetrics
from loadkit.run.gpuoptions import gpu_sources

log = logging.getLogger("loadkit")
PROVIDER = "gpu_samples"


def _providers(runtime: Any) -> dict[str, Any]:
    providers = getattr(runtime.stats, "manifest_providers", None)
    return providers if isinstance(providers, dict) else {}


def resolve_sources(runtime: Any) -> None:
    """At test start on the reporting node (workers read no GPU): each target's GPU source.
    ConfigError (a UserError: the start is refused, exit 2) for one asked for that cannot be
    used: --gpu-nvml on without NVML, a --gpu-metrics NAME that is no target."""
    runtime.gpu_sources = gpu_sources(runtime.config.settings.gpu, [t.spec for t in runtime.targets])


def start_gpu(runtime: Any) -> None:
    old = getattr(runtime, "gpu_metrics", None)
    if old is not None:
        old.stop()
    runtime.gpu_metrics = None
    _providers(runtime).pop(PROVIDER, None)
    sources = getattr(runtime, "gpu_sources", None) or {}
    if not sources:
        return
    interval = runtime.config.settings.scrape_interval_s
    metrics = runtime.gpu_metrics = GpuMetrics(runtime.targets, sources, interval)
    if interval <= 0 and runtime.stats is not None:
        runtime.stats.warn("GPU telemetry asked for with --scrape-interval 0: no GPU sample is taken")
    _providers(runtime)[PROVIDER] = lambda: _provide(runtime, metrics)
    metrics.start()


def _provide(runtime: Any, metrics: GpuMetrics) -> dict[str, Any]:
    # Stopped: the collector knows first (its own test_stop listener may run before loadkit's).
    stopped = metrics.stopped or getattr(runtime.stats, "stopped_wall_ns", None) is not None
    # Once the final report is written the run's directory is never written again (the web UI
    # keeps building live reports after a stop): no more reads then.
    final = bool(getattr(getattr(runtime, "stats_listeners", None), "final_written", False))
    if stopped and not final and metrics.interval_s > 0:
        metrics.stop()
        metrics.sample_once()
        try:
            metrics.write(runtime.starting.report_dir)
        except OSError as exc:
            log.error("loadkit: gpu.jsonl not written: %s", exc)
    return metrics.section()


def stop_gpu(runtime: Any) -> None:
    """At the test's stop: no more periodic reads; the reports read once more each (above)."""
    metrics = getattr(runtime, "gpu_metrics", None)
    if metrics is not None:
        metrics.stop()
