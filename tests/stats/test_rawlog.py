"""The raw-log module is the one home of the raw log: what its writer writes, its reader reads
back (rows and columns), malformed lines are counted (or raised when asked), and every reader in
loadkit finds the files through its name pattern."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loadkit.report.rawdata import load_raw
from loadkit.stats.rawlog import (
    RAW_LOG_GLOB,
    MalformedLine,
    RawLog,
    raw_log_name,
    raw_log_paths,
    read_blocks,
    read_columns,
    read_rows,
)
from tests.helpers.records import record


def written(folder: Path, worker: int | None, n: int) -> list[str]:
    log = RawLog(str(folder / raw_log_name(worker)))
    ids = []
    for i in range(n):
        r = record(ttft_ms=10.0 + i, label=f"l{i}")
        r.measure()
        log.write(r)
        ids.append(r.request_id)
    log.close()
    return ids


def test_the_writers_names_match_the_readers_pattern(tmp_path):
    local = written(tmp_path, None, 2)
    worker = written(tmp_path, 3, 1)
    (tmp_path / "report.json").write_text("{}")
    paths = raw_log_paths(tmp_path)
    assert [p.name for p in paths] == ["requests.jsonl", "requests.worker3.jsonl"]
    assert all(p.match(RAW_LOG_GLOB) for p in paths)
    assert [row["request_id"] for row in read_rows(paths)] == local + worker


def test_rows_read_back_carry_the_metrics_computed_once(tmp_path):
    written(tmp_path, None, 3)
    rows = list(read_rows(raw_log_paths(tmp_path)))
    assert [row["ttft_ms"] for row in rows] == [10.0, 11.0, 12.0]
    columns = read_columns(raw_log_paths(tmp_path), ("ttft_ms", "n_in"), ("label",))
    assert columns.columns["ttft_ms"].tolist() == [10.0, 11.0, 12.0]
    assert columns.columns["label"].tolist() == ["l0", "l1", "l2"]
    assert columns.columns["file"].tolist() == [0, 0, 0] and columns.malformed == 0


def test_malformed_lines_are_counted_or_raised(tmp_path):
    path = tmp_path / "requests.jsonl"
    # A line holding two objects parses as two inside one JSON array: it must still count as bad.
    path.write_bytes(b'{"ttft_ms": 1}\n\n[1]\n{"ttft_ms": 2},{"ttft_ms": 3}\n{"ttft_ms": 4}\n{"ttft_')
    blocks = list(read_blocks(path))
    assert [row["ttft_ms"] for rows, _ in blocks for row in rows] == [1, 4]
    assert sum(bad for _, bad in blocks) == 3
    with pytest.raises(MalformedLine):
        list(read_rows([path], strict=True))
    raw = load_raw(tmp_path)
    assert raw is not None and raw.malformed == 3 and raw.rows == 2
    assert math.isnan(raw.columns["tpot_ms"][0])


def test_no_raw_log_is_none_for_the_report(tmp_path):
    assert raw_log_paths(tmp_path) == [] and load_raw(tmp_path) is None
