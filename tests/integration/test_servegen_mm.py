"""A real Locust run of the shipped ServeGen multimodal sample (multimodal/mm-image chunk-11)
against the simulator: each request carries the images its window's image_count and
image_tokens give, as synthetic PNGs the simulator charges exactly those tokens for (qwen2-vl);
the realised image counts and tokens per image (the simulator's truth log, report.json's images
section) follow the window's distributions. The run ends with the conservation check (issue 34).

Before: the dataset was refused ("multimodal ServeGen rows are not yet supported")."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.sim.testing import sim_process
from loadkit.workload.paths import PACKAGE_DATA
from tests.helpers.runs import check_conservation, raw_records, run_locust, truth_for

pytestmark = pytest.mark.integration

TRACE = PACKAGE_DATA / "traces" / "servegen" / "mm-image" / "chunk-11-trace.csv"
START_S = 55800  # the 43,200 s dataset window: image_count {1: 0.715, 2: 0.019, 3: 0.266}
REQUESTS = 150


def window_tables(start_s: float):
    """(count values, probabilities), (tokens values, probabilities) of the window, read from the file."""
    from loadkit.workload.servegen import dataset_for, read_lengths

    tables = read_lengths(str(dataset_for(TRACE)))
    assert tables.images is not None
    pmfs = tables.images.windows[tables.at(start_s)]
    assert pmfs is not None
    return pmfs


def run(tmp_path, requests: int, images: str = ""):
    scenario = tmp_path / "mm.toml"
    scenario.write_text(
        'schema = "loadkit.scenario/1"\nname = "sgmm"\nseed = 5\n[arrival]\nmodel = "trace"\n'
        f'[trace]\nformat = "servegen"\npath = "{TRACE}"\nstart_s = {START_S}\nend_s = {START_S + 600}\n'
        f"speed = 20.0\nmax_output_tokens = 8\n{images}"
    )
    report_dir = tmp_path / "r"
    with sim_process("--engine", "openai", "--profile", "fast", "--seed", "5",
                     truth_log=str(tmp_path / "truth.jsonl")) as sim:  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "8", "-r", "8", "-t", "40s", "--stop-timeout", "10",
            "--host", sim.url, "--engine", "vllm", "--model", "sim-fast", "--max-requests", str(requests),
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
        truth = truth_for(sim, report_dir) if (report_dir / "report.json").is_file() else {}
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, report_dir, truth


def test_multimodal_servegen_is_replayed_with_its_images(tmp_path):
    _, report_dir, truth = run(tmp_path, REQUESTS)
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert len(ok) == len(rows) == REQUESTS
    (counts_v, counts_p), (tok_v, tok_p) = window_tables(START_S)
    sent_counts, per_image = [], []
    for r in ok:
        t = truth[r["request_id"]]
        assert t["image_count"] == r["image_count"] >= 1  # every request of this window has images
        assert t["image_tokens"] == r["image_tokens"] == r["image_tokens_expected"]
        assert r["request_bytes"] > 10_000 * r["image_count"]
        sent_counts.append(r["image_count"])
        per_image.append(t["image_tokens"] / t["image_count"])
    # Counts: the share of each count against image_count (150 draws: sd of a share <= 0.041).
    got = np.asarray(sent_counts)
    for value, p in zip(counts_v, counts_p, strict=True):
        assert (got == value).mean() == pytest.approx(p, abs=0.13), (value, p)
    # Tokens per image: the mean against image_tokens' mean (sd of the mean over ~230 images ~15).
    expected_mean = float(np.dot(tok_v, tok_p))
    all_tokens = sum(truth[r["request_id"]]["image_tokens"] for r in ok)
    realised_mean = all_tokens / got.sum()
    print(f"image_count mean {got.mean():.3f} (window {np.dot(counts_v, counts_p):.3f}); tokens per image "
          f"{realised_mean:.1f} (window {expected_mean:.1f}) over {got.sum()} images")  # fmt: skip
    assert got.mean() == pytest.approx(float(np.dot(counts_v, counts_p)), abs=0.25)
    assert realised_mean == pytest.approx(expected_mean, rel=0.15)
    images = report["images"]
    assert images["requests_with_images"] == len(ok)
    assert images["image_tokens_source"] == {"usage": len(ok)}
    assert images["image_tokens"]["mean"] == pytest.approx(all_tokens / len(ok), rel=0.02)
    assert any("image_count, image_tokens" in w for w in report["warnings"])


def test_multimodal_servegen_images_by_url_as_jpeg(tmp_path):
    """[images] beside the trace says how its images travel: JPEG, by URL from loadkit's server."""
    _, report_dir, truth = run(tmp_path, 40, '[images]\nformat = "jpeg"\ntransport = "url"\n')
    report = check_conservation(report_dir)
    ok = [r for r in raw_records(report_dir) if r["outcome"] == "ok"]
    assert len(ok) == 40
    for r in ok:
        t = truth[r["request_id"]]
        assert t["image_tokens"] == r["image_tokens"] == r["image_tokens_expected"] > 0
        assert t["image_fetches"] >= 1 and r["request_bytes"] < 20_000
    served = report["images"]["served"]
    assert report["images"]["transport"] == "url"
    assert served["fetches"] == sum(truth[r["request_id"]]["image_fetches"] for r in ok)
    assert served["image_parts_sent"] == sum(r["image_count"] for r in ok) and served["never_fetched"] == 0
