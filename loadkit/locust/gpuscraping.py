"""GPU telemetry sampled during a run, beside the server metrics (locust/scraping.py).

On the node that writes the report (local or master; workers never scrape) one greenlet reads
every target's GPU source (a dcgm-exporter URL, or NVML on this host) every ``--scrape-interval``
seconds. Sample times are this node's monotonic clock mapped once onto the run's wall clock
(stats/wallclock.py), the clock the measured windows are on. The samples go into the manifest
(``gpu_samples``, read by the report's ``gpu`` section) and into ``gpu.jsonl`` in the run
directory, one sample a line, so ``loadkit verify`` can recompute the figures.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import orjson

from loadkit.servers.gpu import GpuError, GpuSampler, dcgm_reader, load_nvml, nvml_reader
from loadkit.servers.targets import Target
from loadkit.stats.wallclock import wall_offset_ns

log = logging.getLogger("loadkit")
MAX_SAMPLES = 24 * 3600  # per target: bounded memory
GPU_LOG = "gpu.jsonl"


def _clock() -> Any:
    offset = wall_offset_ns()  # taken once: later samples follow the monotonic clock
    return lambda: (time.perf_counter_ns() + offset) / 1e9


class GpuMetrics:
    def __init__(self, targets: list[Target], sources: dict[str, str], interval_s: float) -> None:
        self.interval_s = interval_s
        self.samples: dict[str, list[dict[str, Any]]] = {}
        self.samplers: dict[str, GpuSampler] = {}
        clock = _clock()
        self.stopped = False
        by_name = {t.name: t for t in targets}
        for name, source in sources.items():
            try:
                if source == "nvml":
                    read = nvml_reader(load_nvml())
                else:
                    read = dcgm_reader(
                        source, 2.0, by_name[name].endpoint.ssl_context if name in by_name else None
                    )
            except GpuError as exc:
                log.error("loadkit: GPU telemetry of target %s: %s", name, exc)
                read = _failing(str(exc))
            self.samplers[name] = GpuSampler(source, read, clock)
            self.samples[name] = []
        self.greenlet: Any = None

    def start(self) -> None:
        import gevent

        if self.samplers and self.interval_s > 0:
            self.greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        import gevent

        while True:
            self.sample_once()
            gevent.sleep(self.interval_s)

    def sample_once(self) -> None:
        for name, sampler in self.samplers.items():
            if len(self.samples[name]) < MAX_SAMPLES:
                self.samples[name].append(sampler.sample())

    def stop(self) -> None:
        self.stopped = True
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
            self.greenlet = None

    def section(self) -> dict[str, Any]:
        return {name: {"source": s.source, "interval_s": self.interval_s, "samples": self.samples[name],
                       "errors": s.errors} for name, s in self.samplers.items()}  # fmt: skip

    def write(self, report_dir: str | None) -> None:
        """gpu.jsonl: one line per sample, {"target", "source", "t", "gpus", "error"}."""
        if not report_dir or not self.samplers:
            return
        with open(os.path.join(report_dir, GPU_LOG), "wb") as f:
            for name, sampler in self.samplers.items():
                for row in self.samples[name]:
                    f.write(orjson.dumps({"target": name, "source": sampler.source, **row}) + b"\n")


def _failing(reason: str) -> Any:
    def read() -> Any:
        raise GpuError(reason)

    return read
