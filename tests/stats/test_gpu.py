"""The report's GPU figures (loadkit/stats/gpu.py) over a target's measured window: energy from
the counter's difference at the window's ends, else power's trapezoidal integral, J/token and
tokens/J, and the reasons figures are missing."""

from __future__ import annotations

import pytest

from loadkit.stats.gpu import gpu_section, interpolate, target_gpu, trapezoid

NS = 1_000_000_000


def rows(ts, **per_gpu):
    """Samples at times ts; per_gpu: key → list (one GPU) of values, or a callable of t."""
    out = []
    for i, t in enumerate(ts):
        gpu = {k: (v(t) if callable(v) else v[i]) for k, v in per_gpu.items()}
        out.append({"t": t, "gpus": {"0": {k: v for k, v in gpu.items() if v is not None}}, "error": None})
    return out


def test_interpolation_and_the_trapezoid_between_samples():
    ts, ys = [0.0, 1.0, 3.0], [0.0, 10.0, 30.0]
    assert interpolate(ts, ys, 0.5) == 5.0 and interpolate(ts, ys, 2.0) == 20.0
    assert interpolate(ts, ys, -1.0) == 0.0 and interpolate(ts, ys, 9.0) == 30.0
    # ∫ of y = 10 t from 0.5 to 2.5 = 5 (2.5² − 0.5²) = 30
    assert trapezoid(ts, ys, 0.5, 2.5) == pytest.approx(30.0)


def test_energy_from_the_counter_at_the_windows_ends():
    # 200 W steady: the counter gains 200 000 mJ a second; samples every 0.5 s from t = 100.
    ts = [100 + 0.5 * i for i in range(11)]
    samples = rows(
        ts, energy_mj=lambda t: 7e9 + 200_000 * (t - 100), power_w=[999.0] * 11, util_pct=[50.0] * 11
    )
    got = target_gpu({"source": "nvml", "samples": samples}, (int(101.2 * NS), int(103.7 * NS)), 1000)
    assert got["energy_method"] == "energy_counter"  # preferred over power, whatever power says
    assert got["energy_j"] == pytest.approx(200 * 2.5)
    assert got["j_per_output_token"] == pytest.approx(0.5) and got["output_tokens_per_j"] == pytest.approx(
        2.0
    )
    assert got["window"]["seconds"] == pytest.approx(2.5) and got["coverage"] == pytest.approx(1.0)
    assert got["mean_util_pct"] == 50.0 and got["mean_power_w"] == 999.0
    assert got["missing"] == {
        "mem_used_mib": "the source did not report it",
        "gr_active": "the source did not report it",
    }


def test_energy_from_power_when_there_is_no_counter():
    ts = [0.0, 1.0, 2.0, 3.0, 4.0]
    samples = rows(ts, power_w=[100.0, 200.0, 200.0, 100.0, 100.0])
    got = target_gpu({"samples": samples}, (int(0.5 * NS), int(3.5 * NS)), 300)
    # Piecewise-linear power from 0.5 s to 3.5 s: 87.5 + 200 + 150 + 50 = 487.5 J
    assert got["energy_method"] == "power_integral"
    assert got["energy_j"] == pytest.approx(487.5)
    assert got["j_per_output_token"] == pytest.approx(487.5 / 300)
    assert "energy_mj" in got["missing"]


def test_a_window_the_samples_do_not_cover_is_clipped_and_says_so():
    ts = [10.0, 11.0, 12.0]
    samples = rows(ts, energy_mj=lambda t: 1000.0 * t)  # 1 W
    got = target_gpu({"samples": samples}, (9 * NS, 13 * NS), 10)
    assert got["energy_j"] == pytest.approx(2.0) and got["coverage"] == pytest.approx(0.5)
    # 2 J over half the window against all of its 10 tokens would be 0.2 J/token, half the truth.
    assert got["j_per_output_token"] is None and got["output_tokens_per_j"] is None
    assert "cover 50.0 % of the measured window" in got["missing"]["per_token"]


def test_failed_samples_and_no_window_are_missing_with_their_reason():
    failed = [{"t": 1.0, "gpus": {}, "error": "GET http://x/metrics: connection refused"}]
    got = target_gpu({"samples": failed}, (0, 2 * NS), 10)
    assert got["available"] == [] and got["failed_samples"] == 1
    assert got["missing"] == {"all": "every GPU sample failed (GET http://x/metrics: connection refused)"}
    none = target_gpu({"samples": rows([1.0, 2.0], power_w=[1.0, 1.0])}, (None, None), 0)
    assert none["missing"] == {"window": "the target has no measured request"}
    zero = target_gpu({"samples": rows([1.0, 2.0], power_w=[1.0, 1.0])}, (1 * NS, 2 * NS), 0)
    assert zero["energy_j"] == pytest.approx(1.0) and zero["j_per_output_token"] is None
    assert zero["missing"]["per_token"] == "no output token in the window"


def test_several_gpus_are_summed_and_each_target_gets_its_own_window():
    samples = [{"t": t, "gpus": {"0": {"power_w": 100.0, "energy_mj": 100_000 * t},
                                 "1": {"power_w": 50.0, "energy_mj": 50_000 * t}}, "error": None}
               for t in (0.0, 1.0, 2.0)]  # fmt: skip
    got = gpu_section({"a": {"samples": samples}, "b": {"samples": samples}},
                      {"a": (0, 2 * NS, 30), "b": (NS, 2 * NS, 15)})  # fmt: skip
    assert got["a"]["energy_j"] == pytest.approx(300.0) and got["a"]["mean_power_w"] == 150.0
    assert got["b"]["energy_j"] == pytest.approx(150.0) and got["b"]["j_per_output_token"] == pytest.approx(
        10.0
    )
    assert gpu_section(None, {}) == {}
