"""GPU telemetry: NVIDIA dcgm-exporter's Prometheus text, or NVML on the client's own host.

Both sources give one reading per GPU in the same units, so the report's figures
(loadkit/stats/gpu.py) do not care which one was used:

``util_pct`` (0..100, DCGM_FI_DEV_GPU_UTIL / nvmlDeviceGetUtilizationRates().gpu),
``mem_used_mib`` (DCGM_FI_DEV_FB_USED / nvmlDeviceGetMemoryInfo().used in MiB),
``mem_free_mib``, ``power_w`` (DCGM_FI_DEV_POWER_USAGE / nvmlDeviceGetPowerUsage() mW → W),
``energy_mj`` (millijoules since the driver loaded, a counter: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION /
nvmlDeviceGetTotalEnergyConsumption()), ``gr_active`` (0..1, DCGM_FI_PROF_GR_ENGINE_ACTIVE, profiling
metrics only). Names and units as dcgm-exporter's etc/default-counters.csv states them.

A scrape that fails is a row with its error (``GpuSampler.sample`` never raises).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Any

from loadkit.errors import UserError
from loadkit.servers.http import get
from loadkit.servers.metrics import MetricsError, parse_prometheus

# DCGM field name → loadkit's per-GPU key. The exporter writes each one gauge or counter,
# labelled per GPU (gpu, UUID, pci_bus_id, device, modelName, Hostname, and pod labels in Kubernetes).
DCGM_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_FB_USED": "mem_used_mib",
    "DCGM_FI_DEV_FB_FREE": "mem_free_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_active",
}
GPU_KEYS = tuple(DCGM_FIELDS.values())


class GpuError(ValueError):
    """A GPU source could not be read; the message names it."""


class NvmlUnavailable(GpuError, UserError):
    """--gpu-nvml was asked for, and NVML (the nvidia-ml-py package, or the driver) is absent."""


def dcgm_gpus(text: str) -> dict[str, dict[str, Any]]:
    """Per GPU (keyed by its ``gpu`` label, else its UUID), the known fields of one exposition,
    plus the GPU's ``uuid`` and ``model`` labels. MetricsError for text that is not Prometheus."""
    gpus: dict[str, dict[str, Any]] = {}
    for sample in parse_prometheus(text):
        # prometheus-client's parser names a counter's samples NAME_total (OpenMetrics style)
        # even when the exposition wrote NAME, as dcgm-exporter writes its energy counter.
        key = DCGM_FIELDS.get(sample.name) or DCGM_FIELDS.get(sample.name.removesuffix("_total"))
        if key is None:
            continue
        gpu_id = sample.labels.get("gpu") or sample.labels.get("UUID") or "0"
        gpu = gpus.setdefault(gpu_id, {})
        # A GPU shared by several pods is written once per pod with the same value: keep one.
        gpu[key] = sample.value
        if "UUID" in sample.labels:
            gpu["uuid"] = sample.labels["UUID"]
        if "modelName" in sample.labels:
            gpu["model"] = sample.labels["modelName"]
    return gpus


def dcgm_reader(
    url: str, timeout_s: float = 2.0, ssl_context: ssl.SSLContext | None = None
) -> Callable[[], dict[str, dict[str, Any]]]:
    """A reader of one dcgm-exporter endpoint (``http://host:9400/metrics``)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise GpuError(f"GPU metrics URL {url!r}: expected http:// or https://")
    host, slash, path = rest.partition("/")
    base, path = f"{scheme}://{host}", slash + path or "/metrics"

    def read() -> dict[str, dict[str, Any]]:
        try:
            resp = get(base, path, timeout_s, None, ssl_context)
        except OSError as exc:
            raise GpuError(f"GET {url}: {exc}") from None
        if resp.status != 200:
            raise GpuError(f"GET {url}: HTTP {resp.status}")
        try:
            gpus = dcgm_gpus(resp.text)
        except MetricsError as exc:
            raise GpuError(f"GET {url}: {exc}") from None
        if not gpus:
            raise GpuError(f"GET {url}: no DCGM_FI_DEV_* GPU metric in the answer")
        return gpus

    return read


def load_nvml() -> Any:
    """The pynvml module, initialised; NvmlUnavailable saying why not."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise NvmlUnavailable(
            "--gpu-nvml: the nvidia-ml-py package is not installed (pip install 'loadkit[gpu]')"
        ) from None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError: no driver, no GPU
        raise NvmlUnavailable(
            f"--gpu-nvml: NVML could not start (no NVIDIA driver or GPU here?): {exc}"
        ) from None
    return pynvml


def nvml_reader(nvml: Any) -> Callable[[], dict[str, dict[str, Any]]]:
    """A reader of every GPU NVML sees on this host, in the DCGM reader's units."""
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    def optional(function: str, handle: Any) -> Any:
        try:
            return getattr(nvml, function)(handle)
        except Exception:  # NVMLError_NotSupported: e.g. the energy counter before Volta
            return None

    def read() -> dict[str, dict[str, Any]]:
        gpus: dict[str, dict[str, Any]] = {}
        for i, h in enumerate(handles):
            gpu: dict[str, Any] = {}
            util = optional("nvmlDeviceGetUtilizationRates", h)
            if util is not None:
                gpu["util_pct"] = float(util.gpu)
            mem = optional("nvmlDeviceGetMemoryInfo", h)
            if mem is not None:  # bytes
                gpu["mem_used_mib"] = mem.used / 2**20
                gpu["mem_free_mib"] = mem.free / 2**20
            power = optional("nvmlDeviceGetPowerUsage", h)
            if power is not None:  # milliwatts
                gpu["power_w"] = power / 1000.0
            energy = optional("nvmlDeviceGetTotalEnergyConsumption", h)
            if energy is not None:  # millijoules since the driver loaded
                gpu["energy_mj"] = float(energy)
            uuid = optional("nvmlDeviceGetUUID", h)
            if uuid is not None:
                gpu["uuid"] = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            name = optional("nvmlDeviceGetName", h)
            if name is not None:
                gpu["model"] = name.decode() if isinstance(name, bytes) else str(name)
            gpus[str(i)] = gpu
        return gpus

    return read


class GpuSampler:
    """One GPU source read at the caller's pace; ``sample()`` never raises."""

    def __init__(self, source: str, read: Callable[[], dict[str, dict[str, Any]]],
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.source = source
        self.read = read
        self.clock = clock
        self.errors = 0

    def sample(self) -> dict[str, Any]:
        t = self.clock()
        try:
            gpus = self.read()
        except GpuError as exc:
            self.errors += 1
            return {"t": t, "gpus": {}, "error": str(exc)}
        return {"t": t, "gpus": gpus, "error": None}
