"""A real `locust --headless` run of chat requests with images against the simulator
(tests/integration/scenarios/images_small.toml): every request's image tokens, prompt tokens and
bytes agree with the simulator's truth log and the workload's own expectation; report.json's
images section counts them; the conservation check holds. A target whose engine takes no images
is refused at start, naming engine and feature."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust, truth_for

pytestmark = pytest.mark.integration


def run(tmp_path, engine: str, *extra: str):
    report_dir = tmp_path / "r"
    with sim_process("--engine", "openai", "--profile", "fast", "--seed", "7",
                     truth_log=str(tmp_path / "truth.jsonl")) as sim:  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "3", "-r", "3", "-t", "4s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", engine, "--model", "sim-fast",
            "--scenario", str(SCENARIOS / "images_small.toml"),
            "--report-dir", str(report_dir), "--raw-log", *extra,
        )  # fmt: skip
        truth = truth_for(sim, report_dir) if (report_dir / "report.json").is_file() else {}
    return proc, report_dir, truth


def test_images_are_charged_reported_and_counted(tmp_path):
    proc, report_dir, truth = run(tmp_path, "vllm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = [r for r in raw_records(report_dir) if r["outcome"] == "ok"]
    assert len(rows) >= 10
    with_images = [r for r in rows if r["image_count"]]
    assert 0 < len(with_images) < len(rows)  # probability 0.75
    for r in rows:
        t = truth[r["request_id"]]
        assert t["image_tokens"] == (r["image_tokens"] or 0) == (r["image_tokens_expected"] or 0)
        assert t["prompt_tokens"] == r["n_in"]
        assert r["request_bytes"] > (10_000 * r["image_count"] if r["image_count"] else 0)
        # <=: a send whose clock read came after the answer's kernel stamp ends at the answer
        # (client/timer.py _exchange), which can carry the first token with it.
        assert 0 <= r["send_ms"] <= r["ttft_ms"]
    images = report["images"]
    assert images["requests_with_images"] == len([r for r in raw_records(report_dir) if r["image_count"]])
    assert images["image_tokens_source"] == {"usage": len(with_images)}
    assert sum(b["ttft_ms"]["count"] for b in images["ttft_ms_by_image_count"]) == len(rows)
    assert "images:" in proc.stdout


def test_an_engine_without_images_is_refused_at_start(tmp_path):
    proc, _, _ = run(tmp_path, "tgi", "--api", "chat")
    assert proc.returncode != 0
    assert "engine 'tgi' (api 'chat') takes no images" in proc.stdout + proc.stderr
