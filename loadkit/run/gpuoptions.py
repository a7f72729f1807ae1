"""--gpu-metrics and --gpu-nvml: where each target's GPU telemetry comes from (docs/gpu.md).

A target's GPU source is, first to last: its own ``gpu_metrics`` (``--target ...,gpu_metrics=URL``
or ``gpu_metrics`` in a scenario's ``[[targets]]``), a ``--gpu-metrics NAME=URL`` naming it, a bare
``--gpu-metrics URL`` (only with one target), or NVML on this host (``--gpu-nvml``, one target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadkit.run.errors import ConfigError
from loadkit.servers.gpu import NvmlUnavailable, load_nvml
from loadkit.servers.targets import TargetSpec

NVML_MODES = ("off", "on", "auto")


@dataclass(frozen=True, slots=True)
class GpuSettings:
    metrics: tuple[str, ...] = ()  # --gpu-metrics values as given: [NAME=]URL
    nvml: str = "off"  # off | on (an error if NVML cannot start) | auto (used when it can)


def add_gpu_arguments(group: Any) -> None:
    group.add_argument(
        "--gpu-metrics",
        action="append",
        default=[],
        env_var="LOADKIT_GPU_METRICS",
        include_in_web_ui=False,
        help="[NAME=]URL of an NVIDIA dcgm-exporter (e.g. http://host:9400/metrics) serving the GPUs of "
        "target NAME (repeatable; NAME= may be left out with one target): scraped every --scrape-interval "
        "for the report's GPU timeline, energy per output token and tokens per joule",
    )
    group.add_argument(
        "--gpu-nvml",
        choices=NVML_MODES,
        default="off",
        env_var="LOADKIT_GPU_NVML",
        help="Read the GPUs of this host through NVML (nvidia-ml-py, extra 'gpu') as the GPU telemetry of "
        "the run's one target: on (an error if NVML cannot start), auto (when it can), off",
    )


def gpu_settings(options: Any) -> GpuSettings:
    metrics = tuple(str(m) for m in getattr(options, "gpu_metrics", None) or [])
    for value in metrics:
        _split(value)
    nvml = str(getattr(options, "gpu_nvml", "off") or "off")
    if nvml not in NVML_MODES:
        raise ConfigError(f"--gpu-nvml {nvml!r}: expected one of {', '.join(NVML_MODES)}")
    return GpuSettings(metrics, nvml)


def _split(value: str) -> tuple[str | None, str]:
    """``NAME=URL`` or ``URL`` (a URL's own '=' comes after its '://')."""
    name, sep, url = value.partition("=")
    if sep and "://" not in name:
        if not name.strip():
            raise ConfigError(f"--gpu-metrics {value!r}: empty target name before '='")
        return name.strip(), url.strip()
    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"--gpu-metrics {value!r}: expected [NAME=]http(s)://host:port/metrics")
    return None, value.strip()


def gpu_sources(settings: GpuSettings, specs: list[TargetSpec]) -> dict[str, str]:
    """Target name → its GPU source: a dcgm-exporter URL, or "nvml". ConfigError naming the
    value that names no target, or leaves out NAME with several targets."""
    names = [s.name for s in specs]
    out = {s.name: s.gpu_metrics for s in specs if s.gpu_metrics}
    for value in settings.metrics:
        name, url = _split(value)
        if name is None:
            if len(names) != 1:
                raise ConfigError(
                    f"--gpu-metrics {value!r}: the run has {len(names)} targets; write NAME=URL"
                )
            name = names[0]
        if name not in names:
            raise ConfigError(
                f"--gpu-metrics {value!r}: no target named {name!r} (targets: {', '.join(names)})"
            )
        out[name] = url
    if settings.nvml != "off":
        if len(names) != 1:
            raise ConfigError(
                f"--gpu-nvml: the run has {len(names)} targets; NVML reads this host's GPUs for one"
            )
        if names[0] not in out:
            try:
                load_nvml()
                out[names[0]] = "nvml"
            except NvmlUnavailable as exc:
                if settings.nvml == "on":
                    raise ConfigError(str(exc)) from None
    return out
