"""Length sources: every supported file, unusable lines counted by reason, prefix sharing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadkit.capacity import CapacityError, from_list, read_lengths
from tests.capacity.conftest import trace


def test_raw_log_uses_ok_lines_and_counts_the_rest(fixtures: Path) -> None:
    s = read_lengths(fixtures / "requests.jsonl")
    assert s.kind == "raw-log"
    assert s.lengths.tolist() == [120, 57, 13]
    assert s.skipped == {
        "outcome http_error:503": 1,
        "outcome timeout_total": 1,
        "n_in or n_out not measured": 1,
        "malformed line": 1,
    }
    # measured sharing from the server's cached_tokens: 64 of 160 prompt tokens
    assert s.prefix is not None
    assert (s.prefix.prompt_tokens, s.prefix.unique_tokens, s.prefix.sequence_tokens) == (160, 96, 190)


def test_report_dir_merges_worker_logs(tmp_path: Path, fixtures: Path) -> None:
    shutil.copy(fixtures / "requests.jsonl", tmp_path / "requests.worker0.jsonl")
    shutil.copy(fixtures / "requests.jsonl", tmp_path / "requests.worker1.jsonl")
    s = read_lengths(tmp_path)
    assert sorted(s.lengths.tolist()) == sorted([120, 57, 13] * 2)
    assert s.skipped["malformed line"] == 2


def test_empty_report_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CapacityError, match="no requests\\*.jsonl raw log"):
        read_lengths(tmp_path)


def test_mooncake_lengths_and_block_sharing(fixtures: Path) -> None:
    s = read_lengths(fixtures / "mooncake_mini.jsonl", on_bad_row="skip")
    assert s.kind == "mooncake" and s.lengths.tolist() == [1510, 1220, 630]
    assert s.skipped == {"missing hash_ids": 1}
    p = s.prefix
    assert p is not None
    assert (p.prompt_tokens, p.unique_tokens) == (8 * 512, 5 * 512)  # 8 blocks, ids 0..4 unique
    assert p.to_json()["saved_fraction_of_prompt"] == 3 / 8
    assert p.to_json()["saved_fraction_of_kv"] == pytest.approx(1536 / 3360)


def test_azure_and_sharegpt_csv(fixtures: Path) -> None:
    azure = read_lengths(fixtures / "azure_mini.csv", on_bad_row="skip")
    assert azure.kind == "azure" and azure.lengths.tolist() == [418, 505, 934]
    assert azure.skipped == {"bad token count": 1}
    share = read_lengths(fixtures / "sharegpt_mini.csv")
    assert share.kind == "sharegpt" and share.lengths.tolist() == [992, 1195, 2113]
    assert share.prefix is None


def test_unknown_files_are_refused_by_name(tmp_path: Path) -> None:
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(
        CapacityError,
        match=r"x\.csv: line 1 \(header\): CSV header needs the columns ContextTokens,GeneratedTokens",
    ):
        read_lengths(csv)
    jl = tmp_path / "x.jsonl"
    jl.write_text('{"foo": 1}\n')
    with pytest.raises(CapacityError, match=r"x\.jsonl: not a raw log"):
        read_lengths(jl)
    with pytest.raises(CapacityError, match="no such file"):
        read_lengths(tmp_path / "absent.jsonl")
    with pytest.raises(CapacityError, match="unknown lengths file type"):
        read_lengths(csv.rename(tmp_path / "x.parquet"))


def test_inline_lengths_are_validated() -> None:
    assert from_list([3, 4]).summary()["tokens"] == 7
    with pytest.raises(CapacityError):
        from_list([3, -1])


def test_summary_percentiles() -> None:
    s = from_list(list(range(1, 101))).summary()
    assert (s["count"], s["min"], s["max"], s["mean"], s["p50"]) == (100, 1, 100, 50.5, 50.5)


def test_real_azure_trace() -> None:
    s = read_lengths(trace("azure-llm-2023/AzureLLMInferenceTrace_conv.csv"))
    assert s.lengths.size == 19_366 and not s.skipped
    assert s.lengths.mean() == pytest.approx(1155 + 211, abs=1)  # README: input 1,155 + output 211


def test_real_sharegpt_lengths() -> None:
    s = read_lengths(trace("sharegpt-lengths/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"))
    assert s.lengths.size == 30_731
    assert s.lengths.mean() == pytest.approx(2340 + 439, abs=1)


def test_real_mooncake_block_sharing_matches_readme() -> None:
    s = read_lengths(trace("mooncake-fast25/conversation_trace.jsonl"))
    assert s.lengths.size == 12_031 and s.prefix is not None
    assert s.prefix.to_json()["saved_fraction_of_prompt"] == pytest.approx(0.366, abs=0.0005)


def test_unreadable_csv_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.csv"
    bad.write_bytes(b"ContextTokens,GeneratedTokens\n\xff\xfe,1\n")
    with pytest.raises(CapacityError, match=r"latin1\.csv: cannot read as UTF-8 CSV"):
        read_lengths(bad)


def test_raw_log_recognised_by_outcome_when_counts_are_absent(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    log.write_text('{"outcome": "connect_error"}\n{"outcome": "ok", "n_in": 5, "n_out": 6}\n')
    s = read_lengths(log)
    assert s.lengths.tolist() == [11] and s.skipped == {"outcome connect_error": 1}


def test_bad_rows_are_refused_by_default_naming_the_line(fixtures: Path) -> None:
    """The trace reader replay uses, with its default policy: a bad row stops the read."""
    with pytest.raises(CapacityError, match=r"mooncake_mini\.jsonl: line 4: expected the key 'hash_ids'"):
        read_lengths(fixtures / "mooncake_mini.jsonl")
    with pytest.raises(
        CapacityError,
        match=r"azure_mini\.csv: line 5: expected a non-negative integer "
        r"ContextTokens, got 'oops'",
    ):
        read_lengths(fixtures / "azure_mini.csv")


def test_capacity_checks_timestamps_and_refuses_a_header_only_file(tmp_path: Path) -> None:
    bad_time = tmp_path / "t.csv"
    bad_time.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,2\nyesterday,5,1\n")
    with pytest.raises(CapacityError, match=r"t\.csv: line 3: expected TIMESTAMP as an ISO date-time"):
        read_lengths(bad_time)
    assert read_lengths(bad_time, on_bad_row="skip").skipped == {"bad timestamp": 1}
    empty = tmp_path / "e.csv"
    empty.write_text("ContextTokens,GeneratedTokens\n")
    with pytest.raises(CapacityError, match=r"e\.csv: expected at least one data row after the header"):
        read_lengths(empty)


def test_negative_lengths_are_bad_rows_as_in_replay(tmp_path: Path) -> None:
    f = tmp_path / "n.csv"
    f.write_text("input_tokens,output_tokens\n10,2\n-3,4\n")
    with pytest.raises(CapacityError, match=r"n\.csv: line 3: expected a non-negative integer input_tokens"):
        read_lengths(f)
    assert read_lengths(f, on_bad_row="skip").skipped == {"negative token count": 1}
