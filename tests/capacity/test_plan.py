"""plan(): the JSON document, the GPU fit, warnings, and the table/HTML renderings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadkit.capacity import CapacityError, plan, read_lengths, render_html, render_table, report_section

GIB = 2**30
ISSUE_LENGTHS = [12, 105, 43, 512, 88, 3, 230]


def test_plan_is_json_and_complete(fixtures: Path) -> None:
    p = plan(
        "llama-3-8b",
        read_lengths(fixtures / "mooncake_mini.jsonl", on_bad_row="skip"),  # its line 4 has no hash_ids
        kv_dtypes=["fp16", "fp8", "int4"],
        block_sizes=[16, 64],
    )
    doc = orjson.loads(orjson.dumps(p))  # numpy scalars would fail here
    assert doc["schema"] == "loadkit.capacity/1"
    assert [r["variant"] for r in doc["kv_per_token"]["variants"]] == ["mha", "gqa", "mqa"]
    assert [r["block_size"] for r in doc["paging"]["rows"]] == [16, 64]
    assert len(doc["fit"]["rows"]) == 6
    assert doc["prefix_sharing"]["saved_bytes"]["fp16"] == 1536 * 128 * 1024


def test_fit_hand_computed() -> None:
    # llama-3-8b bf16 weights: 8,030,261,248 params x 2 bytes; budget = 80 GiB x 0.9 - weights
    p = plan("llama-3-8b", ISSUE_LENGTHS, kv_dtypes=["fp16"], block_sizes=[64], gpu_memory="80GiB")
    budget = 80 * GIB * 0.9 - 8_030_261_248 * 2
    fit = p["fit"]
    assert fit["kv_budget_bytes_per_gpu"] == pytest.approx(budget)
    row = fit["rows"][0]
    assert row["num_blocks"] == int(budget // (64 * 128 * 1024))
    assert row["max_tokens"] == row["num_blocks"] * 64
    assert row["max_seqs"] == int(row["num_blocks"] // (19 / 7))  # 19 blocks over 7 sequences
    assert row["max_seqs_longest"] == row["num_blocks"] // 8  # the 512-token sequence


def test_tp_and_reserve_shrink_weights_and_kv_per_gpu() -> None:
    one = plan("llama-3-70b", kv_dtypes=["fp8"], block_sizes=[16], gpu_memory="80GiB", tp=1)
    four = plan("llama-3-70b", kv_dtypes=["fp8"], block_sizes=[16], gpu_memory="80GiB", tp=4, reserve="2GiB")
    assert one["fit"]["kv_budget_bytes_per_gpu"] < 0 and one["fit"]["rows"][0]["num_blocks"] == 0
    assert any("weights do not fit" in w for w in one["warnings"])
    w4 = four["weights"]["bytes"] / 4
    assert four["fit"]["kv_budget_bytes_per_gpu"] == pytest.approx(80 * GIB * 0.9 - w4 - 2 * GIB)
    assert four["fit"]["rows"][0]["kv_bytes_per_token_per_gpu"] == 80 * 2 * 256


def test_without_lengths_or_gpu_nothing_is_invented() -> None:
    p = plan("mistral-7b", gpu_memory=None)
    assert p["lengths"] is None and p["paging"] is None and p["fit"] is None and p["prefix_sharing"] is None
    q = plan("mistral-7b")
    assert q["fit"]["rows"][0]["max_seqs"] is None and q["fit"]["rows"][0]["max_tokens"] > 0
    assert any("sliding_window=4096" in w for w in q["warnings"])


def test_weight_dtype_override_and_bad_options() -> None:
    assert plan("llama-3-8b", weight_dtype="int4")["weights"]["bytes"] == 8_030_261_248 // 2
    with pytest.raises(CapacityError, match="unknown dtype 'fp12'"):
        plan("llama-3-8b", kv_dtypes=["fp12"])
    with pytest.raises(CapacityError, match="block sizes must be positive"):
        plan("llama-3-8b", block_sizes=[0, 16])
    with pytest.raises(CapacityError, match="--tp"):
        plan("llama-3-8b", tp=0)
    with pytest.raises(CapacityError, match="expected a number and a unit"):
        plan("llama-3-8b", gpu_memory="80")


def test_warns_about_skipped_lines_and_over_long_sequences(fixtures: Path) -> None:
    p = plan("llama-2-7b", fixtures / "requests.jsonl")
    assert any("lines not used" in w and "malformed line: 1" in w for w in p["warnings"])
    q = plan("llama-2-7b", [5000, 100])
    assert any("1 sequences are longer than the model's context (4096" in w for w in q["warnings"])


def test_table_shows_issue_figures_and_html_is_escaped() -> None:
    p = plan("llama-2-7b", ISSUE_LENGTHS, block_sizes=[8, 64])
    text = render_table(p)
    assert "512 KiB" in text and "MHA (configured)" in text
    assert "2.26%" in text and "18.34%" in text
    page = render_html({**p, "model": {**p["model"], "name": "<b>x</b>"}})
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page


def test_report_section_uses_the_run_raw_log(tmp_path: Path, fixtures: Path) -> None:
    (tmp_path / "requests.jsonl").write_bytes((fixtures / "requests.jsonl").read_bytes())
    result, page = report_section("llama-3-8b", tmp_path, block_sizes=[16])
    assert result is not None and result["lengths"]["count"] == 3
    assert page.startswith('<section class="loadkit-capacity">') and "fragmentation" in page


def test_report_section_never_raises(tmp_path: Path) -> None:
    result, page = report_section("llama-3-8b", tmp_path)  # no raw log: still KV and fit in tokens
    assert result is not None and result["lengths"] is None and result["fit"]["rows"][0]["max_tokens"] > 0
    assert any("no raw log" in w for w in result["warnings"])
    missing, page = report_section(tmp_path / "nope.json", tmp_path)
    assert missing is None and "capacity plan not computed" in page and "no such config file" in page
