"""Real runs with --gpu-metrics against a loopback dcgm-exporter serving the recorded DCGM text
(tests/servers/data/dcgm) with its energy counter advancing at the served power: the report's
J/token is the energy the counter says the GPUs drew over the measured window (from the raw
log) divided by the ok requests' output tokens; an exporter that is down leaves the run valid
with the figures missing and the reason stated."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadkit.report.llmd import schema_errors
from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, load_report, raw_records, run_locust
from tests.helpers.simruns import loadkit

pytestmark = pytest.mark.integration
yaml = pytest.importorskip("yaml")
FIXTURE = Path(__file__).resolve().parents[1] / "servers" / "data" / "dcgm" / "metrics.prom"
POWER_W = {"0": 412.5, "1": 305.25}  # the fixture's DCGM_FI_DEV_POWER_USAGE per GPU
ENERGY0_MJ = {"0": 1503217764812, "1": 1388042519066}  # its counter at the exporter's start


def _answer(text: str, elapsed_s: float) -> str:
    def energy(m: re.Match[str]) -> str:
        gpu = m.group(2)
        return f"{m.group(1)}{ENERGY0_MJ[gpu] + round(POWER_W[gpu] * 1000 * elapsed_s)}"

    return re.sub(r'^(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{gpu="(\d)".*\} )\d+$', energy, text, flags=re.M)


@contextmanager
def dcgm_exporter(served: list[float] | None = None) -> Iterator[str]:
    """The exporter's URL; ``served`` gets the time of every answer it gave."""
    text = FIXTURE.read_text()
    t0 = time.time()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            now = time.time()
            body = _answer(text, now - t0).encode()
            if served is not None:
                served.append(now)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _run(report_dir: Path, gpu_url: str, *extra: str) -> tuple[dict[str, Any], str]:
    with sim_process("--profile", "fast", "--seed", "4") as sim:
        proc = run_locust(
            "--headless", "-u", "4", "-r", "4", "-t", "3s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--scenario", str(SCENARIOS / "closed_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", "--scrape-interval", "0.25",
            "--gpu-metrics", gpu_url, *extra,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return check_conservation(report_dir), proc.stdout


def test_energy_per_token_from_the_exporters_counter(tmp_path):
    report_dir = tmp_path / "r"
    with dcgm_exporter() as url:
        report, stdout = _run(report_dir, url, "--report-format", "llmd-br")
    assert report["valid"], report["invalid_reasons"]
    gpu = report["gpu"]["vllm"]
    rows = raw_records(report_dir)
    # The measured window, from the raw log's own times (monotonic + the writer's wall offset):
    # the report's, from the first request's start (connection set-up included) to the last end.
    start = min(r["t_start_ns"] + r["t_wall_offset_ns"] for r in rows) / 1e9
    end = max(r["t_end_ns"] + r["t_wall_offset_ns"] for r in rows) / 1e9
    assert gpu["window"]["start_unix"] == pytest.approx(start, abs=1e-6)
    assert gpu["window"]["end_unix"] == pytest.approx(end, abs=1e-6)
    tokens = sum(r["n_out"] for r in rows if r["outcome"] == "ok")
    assert gpu["output_tokens"] == tokens > 0
    # The counter advanced at the served power: the window's energy is Σ P × seconds.
    expected_j = sum(POWER_W.values()) * (end - start)
    assert gpu["energy_method"] == "energy_counter"
    assert gpu["coverage"] == pytest.approx(1.0)
    assert gpu["energy_j"] == pytest.approx(expected_j, rel=0.01)
    assert gpu["j_per_output_token"] == pytest.approx(expected_j / tokens, rel=0.01)
    assert gpu["output_tokens_per_j"] == pytest.approx(tokens / expected_j, rel=0.01)
    assert gpu["mean_power_w"] == pytest.approx(412.5 + 305.25)
    assert gpu["mean_util_pct"] == pytest.approx((87 + 64) / 2)
    assert gpu["max_mem_used_mib"] == pytest.approx(73958 + 73870)
    assert gpu["available"] == ["util_pct", "mem_used_mib", "power_w", "energy_mj", "gr_active"]
    assert gpu["gpus"]["0"]["model"] == "NVIDIA H100 80GB HBM3"
    assert gpu["source"] == url and gpu["failed_samples"] == 0
    # The raw samples are in the run directory, one a line, each with both GPUs.
    lines = [orjson.loads(x) for x in (report_dir / "gpu.jsonl").read_bytes().splitlines()]
    assert len(lines) == gpu["samples"] >= 8
    assert all(set(x["gpus"]) == {"0", "1"} and x["target"] == "vllm" for x in lines)
    assert "J/token" in stdout
    html = (report_dir / "report.html").read_text()
    assert 'id="gpu"' in html and "J/token" in html
    # The oracle recomputes the section from gpu.jsonl and the raw log.
    verified = loadkit("verify", str(report_dir))
    assert verified.returncode == 0, verified.stdout[-3000:]
    assert re.search(r"checked gpu: [1-9]\d* figures", verified.stdout)
    # ... and catches a figure that is off by 1 %.
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for f in report_dir.iterdir():
        (tampered / f.name).write_bytes(f.read_bytes())
    bad = orjson.loads((tampered / "report.json").read_bytes())
    bad["gpu"]["vllm"]["j_per_output_token"] *= 1.01
    (tampered / "report.json").write_bytes(orjson.dumps(bad))
    caught = loadkit("verify", str(tampered))
    assert caught.returncode == 1 and "gpu / vllm / j_per_output_token" in caught.stdout, caught.stdout[
        -2000:
    ]
    compared = loadkit(
        "compare", str(report_dir), str(report_dir), "--json", "--fail-if", "gpu.j_per_output_token>+1%"
    )
    assert compared.returncode == 0, compared.stderr[-2000:]
    compare_rows = {r["metric"]: r for r in orjson.loads(compared.stdout)["comparisons"][0]["metrics"]}
    assert (
        compare_rows["gpu.j_per_output_token"]["a"]
        == gpu["j_per_output_token"]
        == compare_rows["gpu.j_per_output_token"]["b"]
    )
    assert compare_rows["gpu.output_tokens_per_j"]["delta"] == 0
    assert orjson.loads(compared.stdout)["rules"][0]["fired"] is False
    [path] = report_dir.glob("benchmark_report_v0.2,_*.yaml")
    document = yaml.safe_load(path.read_text())
    assert schema_errors(document) == []
    [component] = document["results"]["observability"]["components"]
    power = component["aggregate"]["power_consumption"]
    assert power["units"] == "Watts" and power["mean"] == pytest.approx(412.5 + 305.25)


def test_an_exporter_that_is_down_leaves_the_run_valid(tmp_path):
    report_dir = tmp_path / "r"
    report, stdout = _run(report_dir, "http://127.0.0.1:9/metrics")
    assert report["valid"], report["invalid_reasons"]
    gpu = report["gpu"]["vllm"]
    assert gpu["samples"] == gpu["failed_samples"] >= 8
    assert gpu["available"] == []
    assert "every GPU sample failed" in gpu["missing"]["all"] and "127.0.0.1:9" in gpu["missing"]["all"]
    assert "j_per_output_token" not in gpu
    assert report["engines"]["vllm"]["ok"] > 0
    assert "GPU vllm: not measured" in stdout


def test_a_distributed_run_reads_the_gpus_on_the_master_only(tmp_path):
    report_dir = tmp_path / "r"
    served: list[float] = []
    with dcgm_exporter(served) as url:
        report, _ = _run(report_dir, url, "--processes", "2")
    assert report["manifest"]["workers"] == 2
    gpu = report["gpu"]["vllm"]
    # Every answer the exporter gave is one of the report's samples: no worker read it too.
    assert gpu["samples"] == len(served) >= 8 and gpu["failed_samples"] == 0
    assert gpu["output_tokens"] == report["engines"]["vllm"]["output_tokens"] > 0
    assert gpu["energy_method"] == "energy_counter"
    assert gpu["energy_j"] == pytest.approx(sum(POWER_W.values()) * gpu["window"]["seconds"], rel=0.01)
    assert len((report_dir / "gpu.jsonl").read_bytes().splitlines()) == len(served)


def test_a_gpu_source_that_cannot_be_used_refuses_the_start(tmp_path):
    with sim_process("--profile", "fast", "--seed", "4") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "2s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--scenario", str(SCENARIOS / "tiny_fixed.toml"),
            "--report-dir", str(tmp_path / "r"), "--gpu-metrics", "other=http://127.0.0.1:9/metrics",
        )  # fmt: skip
    assert proc.returncode == 2
    assert (
        "--gpu-metrics 'other=http://127.0.0.1:9/metrics': no target named 'other' (targets: vllm)"
        in proc.stderr
    )


def test_nvml_asked_for_where_it_cannot_start_refuses_the_start(tmp_path):
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # not installed, or no driver: this host cannot read NVML
        reason = str(exc)
    else:
        pytest.skip("NVML starts on this host: the refusal cannot happen here")
    with sim_process("--profile", "fast", "--seed", "4") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "2s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--scenario", str(SCENARIOS / "tiny_fixed.toml"),
            "--report-dir", str(tmp_path / "r"), "--gpu-nvml", "on",
        )  # fmt: skip
    assert proc.returncode == 2, reason
    assert "--gpu-nvml: " in proc.stderr and (
        "nvidia-ml-py" in proc.stderr or "NVML could not start" in proc.stderr
    )
    report = load_report(tmp_path / "r")  # the refused start's report: nothing was sent
    assert report["engines"] == {} and report["conservation"]["sent"] == 0
    assert not report["valid"] and "--gpu-nvml" in report["invalid_reasons"][0]
