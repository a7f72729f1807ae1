"""The GPU telemetry's start and stop on the reporting node (called from locust/listeners.py)."""

from __future__ import annotations

import logging
from typing import Any

from loadkit.locust.gpuscraping import GpuMetrics
from loadkit.run.errors import ConfigError
from loadkit.run.gpuoptions import gpu_sources

log = logging.getLogger("loadkit")


def start_gpu(runtime: Any) -> None:
    old = getattr(runtime, "gpu_metrics", None)
    if old is not None:
        old.stop()
    runtime.gpu_metrics = None
    try:
        sources = gpu_sources(runtime.config.settings.gpu, [t.spec for t in runtime.targets])
    except ConfigError as exc:
        # Asked for and impossible (--gpu-nvml on without NVML, a NAME that is no target): the
        # run's report says so, as an error, rather than figures silently absent.
        log.error("loadkit: %s", exc)
        if runtime.stats is not None:
            runtime.stats.mark_invalid(str(exc))
        return
    if not sources:
        return
    interval = runtime.config.settings.scrape_interval_s
    runtime.gpu_metrics = GpuMetrics(runtime.targets, sources, interval)
    if interval <= 0 and runtime.stats is not None:
        runtime.stats.warn("GPU telemetry asked for with --scrape-interval 0: no GPU sample is taken")
    runtime.gpu_metrics.start()


def stop_gpu(runtime: Any) -> None:
    metrics = getattr(runtime, "gpu_metrics", None)
    if metrics is None:
        return
    metrics.stop()
    if runtime.stats is not None:
        runtime.stats.set_manifest_fields({"gpu_samples": metrics.section()})
    try:
        metrics.write(runtime.starting.report_dir)
    except OSError as exc:
        log.error("loadkit: gpu.jsonl not written: %s", exc)
