"""A ServeGen replay's per-window delivered figures in real runs against the simulator, checked
by the shipped ``loadkit verify``: chunk-1 of the shipped language-m-mid sample, file seconds
81600-82500 (one whole window of 48 arrivals, then half a window of 23) at speed 100, so the
schedule lasts 9 s. Each test is one run of 7-12 s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import run_locust
from tests.integration.test_oracle_matrix import checked, tampered, verify

pytestmark = pytest.mark.integration

SCENARIO = """schema = "loadkit.scenario/1"
name = "sg-windows"
seed = 4
[arrival]
model = "trace"
[prompt]
api = "completions"
[trace]
format = "servegen"
path = "${LOADKIT_PACKAGE_DATA}/traces/servegen/language-m-mid/chunk-1-trace.csv"
start_s = 81600
end_s = 82500
speed = 100.0
max_input_tokens = 256
max_output_tokens = 8
"""


def _run(tmp_path: Path, run_time: str) -> tuple[Path, str]:
    scenario = tmp_path / "servegen.toml"
    scenario.write_text(SCENARIO)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust("--headless", "-u", "8", "-r", "8", "-t", run_time, "--stop-timeout", "5",
                          "--host", sim.url, "--scenario", str(scenario), "--report-dir", str(report_dir),
                          "--raw-log")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return report_dir, proc.stderr + proc.stdout


def _table(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["delivered"]["by_target"]["openai"]["stages"]["trace"]["servegen"]


def test_per_window_figures_verify_and_a_wrong_one_is_named(tmp_path):
    report_dir, console = _run(tmp_path, "12s")
    table = _table(json.loads((report_dir / "report.json").read_text()))
    whole, half = table["windows"]
    assert (whole["start_s"], whole["part"], whole["covered_s"]) == (81600.0, "full", 6.0)
    assert (half["start_s"], half["part"], half["covered_s"]) == (82200.0, "part", 3.0)
    assert whole["file"]["rate"] == pytest.approx(8.0) and whole["file"]["cv"] == pytest.approx(
        1.7432, abs=1e-4
    )
    assert [w["synthesised"]["arrivals"] for w in table["windows"]] == [48, 23]
    assert "servegen openai/trace: the client sent the synthesised schedule" in console
    assert "window 81600 s (full, 6 s): file 8/s CV 1.74, synthesised 48" in console
    out = verify(report_dir)
    # Per window: file rate, CV, family, covered, part, count, rate, judged, faithful, ceiling,
    # realised count, rate, CV; and the table's trace, speed and window starts.
    assert checked(out, "delivered") >= 20 + 2 * 12, out

    def faster(doc: dict[str, Any]) -> None:
        _table(doc)["windows"][1]["realised"]["cv"] *= 1.01

    proc = tampered(report_dir, tmp_path / "t", faster)
    assert proc.returncode == 1, proc.stdout
    assert "DISAGREES delivered / openai / trace / servegen / 82200 / realised.cv: report" in proc.stdout


def test_a_run_stopped_mid_window_reports_the_part_it_covered(tmp_path):
    report_dir, _ = _run(tmp_path, "7s")
    whole, cut = _table(json.loads((report_dir / "report.json").read_text()))["windows"]
    assert whole["part"] == "full" and cut["part"] == "part" and 0 < cut["covered_s"] < 3.0
    assert (
        cut["synthesised"]["arrivals"] < 23 and cut["realised"]["arrivals"] == cut["synthesised"]["arrivals"]
    )
    verify(report_dir)
