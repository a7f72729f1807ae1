"""The GPU section's outputs (loadkit/report/gpu.py): the console line, the HTML section with a
timeline per figure, the llm-d statistics over the window's samples, and compare's rows; each
from a report the stats' own gpu section (loadkit/stats/gpu.py) built from samples."""

from __future__ import annotations

import pytest

from loadkit.report.gpu import compare_metrics, console_lines, engine_metrics, html_section, llmd_resources
from loadkit.report.llmdobserve import observability
from loadkit.report.rules import metric_value
from loadkit.stats.gpu import gpu_section

NS = 1_000_000_000


def report_with(power: tuple[float, float], tokens: int, error: str | None = None) -> dict:
    samples = [{"t": float(t), "gpus": {"0": {"util_pct": 50.0 + t, "mem_used_mib": 1000.0, "power_w": power[0],
                                              "energy_mj": 1000.0 * power[0] * t},
                                        "1": {"util_pct": 10.0, "mem_used_mib": 500.0, "power_w": power[1],
                                              "energy_mj": 1000.0 * power[1] * t}}, "error": None}
               for t in range(0, 11)]  # fmt: skip
    if error:
        samples = [{"t": 1.0, "gpus": {}, "error": error}]
    manifest = {
        "gpu_samples": {"vllm": {"source": "http://dcgm:9400/metrics", "interval_s": 1.0, "samples": samples}}
    }
    gpu = gpu_section(manifest["gpu_samples"], {"vllm": (2 * NS, 8 * NS, tokens)})
    return {"manifest": manifest, "gpu": gpu, "engines": {"vllm": {}}}


def test_console_says_j_per_token_or_why_not():
    [line] = console_lines(report_with((300.0, 100.0), 1200))
    # 400 W over 6 s = 2400 J for 1200 tokens
    assert line.startswith("GPU vllm: 2.000 J/token, 0.50 tokens/J; 2400.0 J over 6.00 s (energy_counter)")
    [down] = console_lines(report_with((0, 0), 10, error="GET http://dcgm:9400/metrics: connection refused"))
    assert (
        down
        == "GPU vllm: not measured (all: every GPU sample failed (GET http://dcgm:9400/metrics: connection refused))"
    )
    assert console_lines({"engines": {}}) == []


def test_the_html_section_has_a_table_and_a_timeline_per_figure():
    html = html_section(report_with((300.0, 100.0), 1200))
    assert 'id="gpu"' in html and "energy_counter" in html
    for key in ("util_pct", "mem_used_mib", "power_w"):
        assert f"gpu-{key}-vllm" in html
    assert "GPU 0" in html and "GPU 1" in html
    assert html_section({"engines": {}}) == ""


def test_llmd_statistics_over_the_windows_samples():
    report = report_with((300.0, 100.0), 1200)
    got = llmd_resources(report, "vllm")
    assert got["power_consumption"]["units"] == "Watts" and got["power_consumption"]["mean"] == 400.0
    # util of GPU 0 is 50 + t, GPU 1 10: per sample the mean, t = 2..8 inside the window.
    assert got["gpu_utilization"]["min"] == pytest.approx(31.0) and got["gpu_utilization"][
        "max"
    ] == pytest.approx(34.0)
    assert got["gpu_memory_usage"] == {**got["gpu_memory_usage"], "units": "MiB", "mean": 1500.0}
    [component] = observability(report, "vllm")["components"]
    assert component["component_label"] == "vllm" and "power_consumption" in component["aggregate"]


def test_compare_reads_j_per_token_beside_the_engine_section():
    a, b = report_with((300.0, 100.0), 1200), report_with((300.0, 100.0), 2400)
    sa = {"requests": 1, **engine_metrics(a, "vllm")}
    sb = {"requests": 1, **engine_metrics(b, "vllm")}
    assert compare_metrics(sa, sb) == ("gpu.j_per_output_token", "gpu.output_tokens_per_j")
    # --fail-if and the rows read the dotted path as any engine figure.
    assert metric_value(sa, "gpu.j_per_output_token") == pytest.approx(2.0)
    assert metric_value(sb, "gpu.j_per_output_token") == pytest.approx(1.0)
    assert metric_value(sb, "gpu.output_tokens_per_j") == pytest.approx(1.0)
    # A run without GPU figures: no rows, and a rule on one reads "not measured" (it fires).
    none = {"requests": 1, **engine_metrics({"engines": {}}, "vllm")}
    assert metric_value(none, "gpu.j_per_output_token") is None
    assert compare_metrics(none, none) == () and compare_metrics(none, sa) == compare_metrics(sa, sb)
