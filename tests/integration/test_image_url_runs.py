"""A real `locust --headless` run whose images travel as URLs (``[images] transport = "url"``,
tests/integration/scenarios/images_url.toml): loadkit's image server serves them, the simulator
fetches each (as vLLM does) and charges its tokens by resolution. The requests carry no image
bytes; the server's fetch count equals the simulator's; an image server the engine cannot reach
is an http_error:400 whose message, the simulator's, reaches the report. Conservation holds."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust, truth_for

pytestmark = pytest.mark.integration


def run(tmp_path, scenario, *extra: str):
    report_dir = tmp_path / "r"
    with sim_process("--engine", "openai", "--profile", "fast", "--seed", "7",
                     truth_log=str(tmp_path / "truth.jsonl")) as sim:  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "3", "-r", "3", "-t", "4s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--model", "sim-fast",
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log", *extra,
        )  # fmt: skip
        truth = truth_for(sim, report_dir) if (report_dir / "report.json").is_file() else {}
    return proc, report_dir, truth


@pytest.mark.parametrize("processes", [None, "2"])
def test_images_by_url_are_fetched_charged_and_counted(tmp_path, processes):
    """With --processes 2, each worker serves its own images (its own port) and the report
    sums both servers' counts."""
    extra = ("--processes", processes) if processes else ()
    proc, report_dir, truth = run(tmp_path, SCENARIOS / "images_url.toml", *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) == len(rows) >= 10
    fetches = 0
    for r in ok:
        t = truth[r["request_id"]]
        assert r["image_count"] >= 1 and t["image_count"] == r["image_count"]
        assert t["image_tokens"] == r["image_tokens"] == r["image_tokens_expected"]
        assert 1 <= t["image_fetches"] <= r["image_count"] and t["image_fetch_ms"] >= 0
        assert r["request_bytes"] < 1500 * r["image_count"] + 2000  # URLs, not the pictures
        fetches += t["image_fetches"]
    images = report["images"]
    assert images["transport"] == "url"
    served = images["served"]
    assert served["image_parts_sent"] == sum(r["image_count"] for r in rows)
    assert served["fetches"] == fetches and served["misses"] == 0 and served["never_fetched"] == 0
    assert served["bytes_served"] > 1000 * served["fetches"]
    if processes:
        assert len(list(report_dir.glob("requests*.jsonl"))) == 2  # both workers sent
    assert "fetched, 0 never fetched" in proc.stdout
    assert "Transport: URLs served by loadkit" in (report_dir / "report.html").read_text()


def test_an_image_server_the_engine_cannot_reach_is_a_400_with_the_engines_reason(tmp_path):
    scenario = tmp_path / "unreachable.toml"
    text = (SCENARIOS / "images_url.toml").read_text()
    scenario.write_text(text + 'url_host = "unreachable.invalid"\n')
    proc, report_dir, truth = run(tmp_path, scenario)
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert rows and all(r["outcome"] == "http_error:400" for r in rows)
    (s,) = report["engines"].values()
    entry = s["error_messages"]["http_error:400"]
    assert entry["total"] == len(rows) and entry["top"]
    assert all("Failed to fetch image from http://unreachable.invalid:" in t["message"] for t in entry["top"])
    assert all(truth[r["request_id"]]["image_fetch_error"].startswith("Failed to fetch image") for r in rows)
    served = report["images"]["served"]
    assert served["fetches"] == 0 and served["never_fetched"] == served["distinct_images_sent"] > 0
    assert proc.returncode != 0
