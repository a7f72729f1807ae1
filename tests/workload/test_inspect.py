"""`loadkit traces inspect`: every supported format, figures computed from the file itself."""

from __future__ import annotations

import json

import pytest

from loadkit.cli import main as loadkit_main
from loadkit.workload.paths import PACKAGE_DATA

TRACES = PACKAGE_DATA / "traces"


def inspect_json(capsys, *args: str) -> dict:
    assert loadkit_main(["traces", "inspect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_azure_rate_cv_and_lengths_match_the_file(capsys):
    path = TRACES / "azure-llm-2023" / "AzureLLMInferenceTrace_conv.csv"
    r = inspect_json(capsys, str(path))
    assert r["format"] == "azure" and r["requests"] == 19_366
    # The data README's figures: 5.5 req/s, CV 1.09, input mean 1,155 / p99 4,142.
    assert r["rate_per_s"] == pytest.approx(5.53, abs=0.01) and r["inter_arrival_cv"] == pytest.approx(
        1.09, abs=0.01
    )
    assert round(r["input_tokens"]["mean"]) == 1155 and round(r["input_tokens"]["p99"]) == 4142
    assert r["prefix_sharing"] is None


def test_mooncake_sharing_and_a_window_with_its_history(capsys):
    path = TRACES / "mooncake-fast25" / "conversation_trace.jsonl"
    r = inspect_json(capsys, str(path))
    assert r["requests"] == 12_031 and round(100 * r["prefix_sharing"]["block_repeat_ratio"], 1) == 36.6
    w = inspect_json(capsys, str(path), "--start-s", "1800", "--end-s", "2400")
    assert 0 < w["requests"] < 12_031 and w["span_s"] < 600
    inside, history = w["prefix_sharing"], w["prefix_sharing_with_history"]
    assert history["block_repeat_ratio"] > inside["block_repeat_ratio"]  # the cache state before the window
    assert history["blocks"] == inside["blocks"]


def test_lengths_table_without_timestamps_and_servegen(capsys):
    r = inspect_json(
        capsys, str(TRACES / "sharegpt-lengths" / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv")
    )
    assert r["format"] == "lengths" and r["requests"] == 30_731 and r["rate_per_s"] is None
    assert round(r["input_tokens"]["mean"]) == 2340
    sg = inspect_json(
        capsys,
        str(TRACES / "servegen" / "language-m-mid" / "chunk-0-trace.csv"),
        "--start-s",
        "206400",
        "--end-s",
        "207600",
    )
    assert sg["format"] == "servegen" and sg["synthesised"]["seed"] == 0
    assert sg["rate_per_s"] == pytest.approx((27.588 + 30.423) / 2, rel=0.01)


def test_servegen_multimodal_shows_its_images(capsys):
    """mm-image chunk 11: the window's image counts and tokens per image, as drawn and as sent."""
    path = str(TRACES / "servegen" / "mm-image" / "chunk-11-trace.csv")
    r = inspect_json(capsys, path, "--start-s", "55800", "--end-s", "56400")
    im = r["images"]
    assert im["family"] == "qwen2-vl" and im["requests_with_images"] == r["requests"] > 1000
    assert sum(im["image_count"].values()) == r["requests"] and set(im["image_count"]) == {"1", "2", "3"}
    # The 43,200 s window: image_count {1: 0.715, 2: 0.019, 3: 0.266}; image_tokens mean 378.
    assert im["image_count"]["3"] / r["requests"] == pytest.approx(0.266, abs=0.04)
    assert im["image_tokens_per_image"]["mean"] == pytest.approx(378, rel=0.05)
    assert im["image_tokens_as_sent"]["mean"] == pytest.approx(im["image_tokens_per_image"]["mean"], abs=1)
    assert loadkit_main(["traces", "inspect", path, "--start-s", "55800", "--end-s", "56400"]) == 0
    out = capsys.readouterr().out
    assert "images: " in out and "image tokens per image mean" in out and "(qwen2-vl sizes)" in out


def test_text_output_and_a_bad_file_exit_2(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("ts,inp,out\n3,10,1\n1,20,2\n2,-1,3\n")
    assert (
        loadkit_main(
            [
                "traces",
                "inspect",
                str(path),
                "--timestamp-column",
                "ts",
                "--input-column",
                "inp",
                "--output-column",
                "out",
            ]
        )
        == 2
    )
    assert "line 4: expected a non-negative integer inp, got '-1'" in capsys.readouterr().err
    assert (
        loadkit_main(
            [
                "traces",
                "inspect",
                str(path),
                "--timestamp-column",
                "ts",
                "--input-column",
                "inp",
                "--output-column",
                "out",
                "--on-bad-row",
                "skip",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert (
        "requests 2 over 2.0 s" in text
        and "warning:" in text
        and "1 of 3 rows have a timestamp earlier" in text
    )
