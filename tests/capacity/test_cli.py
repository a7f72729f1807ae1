"""`loadkit capacity` end to end through the real dispatcher: output, JSON, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadkit.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["capacity", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_output(capsys: pytest.CaptureFixture[str], fixtures: Path) -> None:
    code, out, err = _run(
        capsys,
        "--model",
        str(fixtures / "gqa_config.json"),
        "--lengths",
        "12,105,43,512,88,3,230",
        "--block-sizes",
        "8,64",
        "--gpu-memory",
        "24GiB",
    )
    assert code == 0 and err == ""
    assert "128 KiB" in out and "2.26%" in out and "18.34%" in out and "fit per GPU: 24 GiB" in out


def test_json_output(capsys: pytest.CaptureFixture[str], fixtures: Path) -> None:
    code, out, _ = _run(
        capsys,
        "--model",
        "deepseek-v3",
        "--json",
        "--kv-dtype",
        "bf16,fp8",
        "--tp",
        "8",
        "--gpu-memory",
        "141GB",
        "--lengths-from",
        str(fixtures / "mooncake_mini.jsonl"),
        "--on-bad-row",
        "skip",  # the fixture's line 4 has no hash_ids
    )
    doc = json.loads(out)
    assert code == 0 and doc["model"]["attention"] == "mla" and doc["fit"]["tp"] == 8
    assert doc["fit"]["gpu_memory_bytes"] == 141 * 10**9
    assert doc["prefix_sharing"]["saved_fraction_of_prompt"] == 0.375


def test_list_presets(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--list-presets")
    assert code == 0 and "llama-3-8b" in out.split()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "--model CONFIG.json|PRESET is required"),
        (("--model", "missing.json"), "'missing.json': no such config file and not a preset"),
        (
            ("--model", "FIXTURE/missing_heads_config.json"),
            "missing_heads_config.json: missing key 'num_attention_heads'",
        ),
        (
            ("--model", "llama-3-8b", "--block-sizes", "8,x"),
            "--block-sizes: expected comma-separated integers",
        ),
        (("--model", "llama-3-8b", "--lengths-from", "nowhere.csv"), "'nowhere.csv': no such file"),
        (("--model", "llama-3-8b", "--gpu-util", "1.5"), "--gpu-util must be in (0, 1]"),
        (("--model", "llama-3-8b", "--frobnicate"), "unrecognized arguments: --frobnicate"),
    ],
)
def test_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], fixtures: Path, argv: tuple[str, ...], message: str
) -> None:
    argv = tuple(a.replace("FIXTURE", str(fixtures)) for a in argv)
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("loadkit capacity: error: ") and message in err
