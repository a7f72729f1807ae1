"""GPU sources (loadkit/servers/gpu.py): dcgm-exporter's text read per GPU in its documented
units, NVML's readings mapped onto the same keys and units, and failures as rows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from loadkit.servers import gpu
from loadkit.servers.gpu import GpuError, GpuSampler, NvmlUnavailable, dcgm_gpus, dcgm_reader, nvml_reader
from tests.helpers.stubserver import Answer, stub_server

FIXTURE = Path(__file__).parent / "data" / "dcgm" / "metrics.prom"


def test_the_recorded_exporter_text_reads_per_gpu_in_its_units():
    gpus = dcgm_gpus(FIXTURE.read_text())
    assert set(gpus) == {"0", "1"}
    g0 = gpus["0"]
    assert g0["util_pct"] == 87.0  # %
    assert g0["mem_used_mib"] == 73958.0 and g0["mem_free_mib"] == 7313.0  # MiB
    assert g0["power_w"] == 412.5  # W
    # The counter (written without _total, read back by prometheus-client as NAME_total): mJ.
    assert g0["energy_mj"] == 1503217764812.0
    assert g0["gr_active"] == pytest.approx(0.812345)
    assert g0["uuid"] == "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
    assert g0["model"] == "NVIDIA H100 80GB HBM3"
    assert gpus["1"]["power_w"] == 305.25


def test_other_metrics_are_ignored_and_a_gpu_without_the_gpu_label_is_keyed_by_uuid():
    text = (
        '# TYPE DCGM_FI_DEV_SM_CLOCK gauge\nDCGM_FI_DEV_SM_CLOCK{gpu="0"} 139\n'
        '# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{UUID="GPU-x"} 70.5\n'
    )
    assert dcgm_gpus(text) == {"GPU-x": {"power_w": 70.5, "uuid": "GPU-x"}}


def test_an_exporter_answer_is_read_over_http_and_failures_become_rows():
    text = {"Content-Type": "text/plain"}
    routes = {("GET", "/metrics"): Answer(FIXTURE.read_bytes(), 200, text),
              ("GET", "/other"): Answer(b"# TYPE up gauge\nup 1\n", 200, text),
              ("GET", "/bad"): Answer(b"not { prometheus\n", 200, text)}  # fmt: skip
    with stub_server(routes) as (url, _):
        assert dcgm_reader(f"{url}/metrics")()["1"]["mem_used_mib"] == 73870.0
        sampler = GpuSampler("dcgm", dcgm_reader(f"{url}/other"), clock=lambda: 5.0)
        row = sampler.sample()
        assert row == {
            "t": 5.0,
            "gpus": {},
            "error": f"GET {url}/other: no DCGM_FI_DEV_* GPU metric in the answer",
        }
        bad = GpuSampler("dcgm", dcgm_reader(f"{url}/bad")).sample()
        assert "line 1 is not Prometheus text" in bad["error"]
        missing = GpuSampler("dcgm", dcgm_reader(f"{url}/nope")).sample()
        assert missing["error"].endswith("HTTP 404")
        assert sampler.errors == 1
    with pytest.raises(GpuError, match="expected http"):
        dcgm_reader("host:9400/metrics")


class FakeNvml:
    """NVML's functions at the module boundary, with NVML's own units: bytes, milliwatts, mJ."""

    def __init__(self, energy_supported: bool = True) -> None:
        self.energy_supported = energy_supported

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 (NVML's names)
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:  # noqa: N802
        return SimpleNamespace(gpu=[91, 12][h], memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # noqa: N802
        return SimpleNamespace(used=[3 * 2**30, 512 * 2**20][h], free=2**30, total=4 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return [287_500, 61_250][h]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:  # noqa: N802
        if not self.energy_supported:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return [123_456_789, 42][h]

    def nvmlDeviceGetUUID(self, h: int) -> bytes:  # noqa: N802
        return f"GPU-{h}".encode()

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return "NVIDIA L4"


def test_nvml_readings_map_onto_the_dcgm_keys_and_units():
    read = nvml_reader(FakeNvml())()
    assert read["0"] == {"util_pct": 91.0, "mem_used_mib": 3072.0, "mem_free_mib": 1024.0, "power_w": 287.5,
                         "energy_mj": 123_456_789.0, "uuid": "GPU-0", "model": "NVIDIA L4"}  # fmt: skip
    assert read["1"]["mem_used_mib"] == 512.0 and read["1"]["power_w"] == 61.25


def test_an_nvml_figure_the_gpu_does_not_support_is_left_out():
    read = nvml_reader(FakeNvml(energy_supported=False))()
    assert "energy_mj" not in read["0"] and read["0"]["power_w"] == 287.5


def test_nvml_asked_for_without_the_package_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    with pytest.raises(NvmlUnavailable, match=r"nvidia-ml-py package is not installed .*loadkit\[gpu\]"):
        gpu.load_nvml()


def test_real_nvml_on_this_host():
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (extra 'gpu')")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        # This machine: no NVIDIA driver (libnvidia-ml.so absent), no /dev/nvidia*: a platform fact.
        with pytest.raises(NvmlUnavailable, match="NVML could not start"):
            gpu.load_nvml()
        pytest.skip(f"no NVIDIA GPU or driver on this host: NVML says {exc}")
    read = nvml_reader(gpu.load_nvml())()
    assert read, "NVML started but listed no GPU"
    for g in read.values():
        assert 0 <= g["util_pct"] <= 100 and g["mem_used_mib"] > 0 and g["power_w"] > 0
