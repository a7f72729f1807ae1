"""Where each target's GPU telemetry comes from (loadkit/run/gpuoptions.py), and the errors that
name the value a user has to fix."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadkit.run.errors import ConfigError
from loadkit.run.gpuoptions import GpuSettings, gpu_settings, gpu_sources
from loadkit.servers.targets import TargetError, TargetSpec, parse_target

A = TargetSpec("a", "http://a:8000")
B = TargetSpec("b", "http://b:8000")


def test_a_bare_url_serves_the_only_target_and_name_equals_url_a_named_one():
    assert gpu_sources(GpuSettings(("http://g:9400/metrics",)), [A]) == {"a": "http://g:9400/metrics"}
    got = gpu_sources(GpuSettings(("b=http://gb:9400/metrics?x=1",)), [A, B])
    assert got == {"b": "http://gb:9400/metrics?x=1"}


def test_the_targets_own_gpu_metrics_and_the_target_syntax():
    spec = parse_target("a=http://a:8000,engine=vllm,gpu_metrics=http://dcgm:9400/metrics")
    assert spec.gpu_metrics == "http://dcgm:9400/metrics"
    assert gpu_sources(GpuSettings(), [spec, B]) == {"a": "http://dcgm:9400/metrics"}
    with pytest.raises(TargetError, match="gpu_metrics"):
        parse_target("a=http://a:8000,gpu=http://x")


def test_values_that_cannot_be_used_are_named():
    with pytest.raises(
        ConfigError, match=r"--gpu-metrics 'http://g/metrics': the run has 2 targets; write NAME=URL"
    ):
        gpu_sources(GpuSettings(("http://g/metrics",)), [A, B])
    with pytest.raises(ConfigError, match=r"no target named 'c' \(targets: a, b\)"):
        gpu_sources(GpuSettings(("c=http://g/metrics",)), [A, B])
    with pytest.raises(ConfigError, match="expected .NAME=.http"):
        gpu_settings(SimpleNamespace(gpu_metrics=["g:9400/metrics"], gpu_nvml="off"))
    with pytest.raises(ConfigError, match="--gpu-nvml: the run has 2 targets"):
        gpu_sources(GpuSettings(nvml="auto"), [A, B])


def test_nvml_on_without_nvml_is_an_error_and_auto_leaves_it_out(monkeypatch):
    from loadkit.run import gpuoptions
    from loadkit.servers.gpu import NvmlUnavailable

    def unavailable() -> None:
        raise NvmlUnavailable("--gpu-nvml: NVML could not start (no NVIDIA driver or GPU here?): x")

    monkeypatch.setattr(gpuoptions, "load_nvml", unavailable)
    with pytest.raises(ConfigError, match="NVML could not start"):
        gpu_sources(GpuSettings(nvml="on"), [A])
    assert gpu_sources(GpuSettings(nvml="auto"), [A]) == {}
    monkeypatch.setattr(gpuoptions, "load_nvml", lambda: object())
    assert gpu_sources(GpuSettings(nvml="auto"), [A]) == {"a": "nvml"}
    # A target's dcgm-exporter wins over NVML.
    assert gpu_sources(GpuSettings(("http://g/m",), "on"), [A]) == {"a": "http://g/m"}
