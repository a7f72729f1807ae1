"""Trace loading is exact and loud: unsorted rows, bad rows, errors naming file and line."""

from __future__ import annotations

import pytest

from loadkit.workload import ScenarioError, load_scenario
from loadkit.workload.tracereader import TraceReadError, read_trace

TIMED = """
[arrival]
model = "trace"
[trace]
format = "lengths"
path = "t.csv"
timestamp_column = "ts"
input_column = "inp"
output_column = "out"
"""


def write_csv(tmp_path, body: str, name: str = "t.csv"):
    path = tmp_path / name
    path.write_text(body)
    return path


def test_unsorted_rows_are_sent_in_time_order_with_their_own_lengths(write_scenario, tmp_path):
    """The issue's case: rows at 10, 2, 5, 1 s. Each arrival carries the row of that time, for
    any number of senders (the result used to depend on -u)."""
    write_csv(tmp_path, "ts,inp,out\n10,100,1\n2,200,2\n5,300,3\n1,400,4\n")
    sc = load_scenario(write_scenario(TIMED))
    src = sc.request_source()
    assert src.trace_arrival_times_s() == [0.0, 1.0, 4.0, 9.0]
    assert [(r.n_in_target, r.max_tokens) for r in iter(src.next_item, None)] == [
        (400, 4),
        (200, 2),
        (300, 3),
        (100, 1),
    ]
    notes = src.load_notes()
    assert len(notes) == 1 and "3 of 4 rows have a timestamp earlier than a row above them" in notes[0]
    assert "sorted by timestamp" in notes[0]
    assert src.realised()["trace_load"]["out_of_order"] == 3
    # Two workers: each arrival still pairs with its own row.
    pairs = []
    for w in range(2):
        part = sc.request_source(w, 2)
        pairs += zip(
            part.trace_arrival_times_s(), [r.n_in_target for r in iter(part.next_item, None)], strict=True
        )
    assert sorted(pairs) == [(0.0, 400), (1.0, 200), (4.0, 300), (9.0, 100)]


def test_order_file_keeps_file_order_and_never_sends_back_in_time(write_scenario, tmp_path):
    write_csv(tmp_path, "ts,inp,out\n10,100,1\n2,200,2\n12,300,3\n")
    src = load_scenario(write_scenario(TIMED + 'order = "file"\n')).request_source()
    assert [r.n_in_target for r in iter(src.next_item, None)] == [100, 200, 300]
    assert src.trace_arrival_times_s() == [0.0, 0.0, 2.0]  # the 2 s row goes right after the 10 s one
    assert "kept in file order" in src.load_notes()[0]


def test_sorted_trace_has_no_notes(write_scenario, tmp_path):
    write_csv(tmp_path, "ts,inp,out\n0,1,1\n1,2,2\n1,3,3\n")
    src = load_scenario(write_scenario(TIMED)).request_source()
    assert src.load_notes() == [] and src.realised()["trace_load"]["out_of_order"] == 0


def test_bad_row_is_refused_naming_file_line_and_expectation(write_scenario, tmp_path):
    write_csv(tmp_path, "ts,inp,out\n0,10,1\n1,abc,2\n")
    with pytest.raises(
        ScenarioError,
        match=r"trace\.path: .*t\.csv: line 3: expected a non-negative integer "
        r"inp, got 'abc'",
    ):
        load_scenario(write_scenario(TIMED))


def test_negative_lengths_are_bad_rows_not_clamped(write_scenario, tmp_path):
    write_csv(tmp_path, "ts,inp,out\n0,10,1\n1,-5,2\n2,7,3\n")
    with pytest.raises(ScenarioError, match=r"t\.csv: line 3: expected a non-negative integer inp, got '-5'"):
        load_scenario(write_scenario(TIMED))
    src = load_scenario(write_scenario(TIMED + 'on_bad_row = "skip"\n', name="skip.toml")).request_source()
    assert [r.n_in_target for r in iter(src.next_item, None)] == [10, 7]
    load = src.realised()["trace_load"]
    assert load["skipped_bad_rows"] == {"negative token count": 1}
    assert load["skipped_examples"] == ["line 3: expected a non-negative integer inp, got '-5'"]
    assert "1 bad rows skipped" in src.load_notes()[0]


def test_unparseable_timestamp_names_the_line(tmp_path):
    path = write_csv(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.68,1,1\n2023-11-16 18:15:47,2,2\nsoon,3,3\n",
    )
    with pytest.raises(TraceReadError, match=r"line 4: expected TIMESTAMP as an ISO date-time"):
        read_trace(path, "azure")
    rows = read_trace(path, "azure", on_bad_row="skip")
    assert rows.skipped == {"bad timestamp": 1} and rows.lines.tolist() == [2, 3]


def test_headerless_csv_says_the_first_row_was_read_as_a_header(tmp_path):
    path = write_csv(tmp_path, "0,10,1\n1,20,2\n")
    with pytest.raises(
        TraceReadError,
        match=r"line 1: expected a header row naming 'ts', 'inp', 'out'; "
        r"line 1 \(0,10,1\) looks like data",
    ):
        read_trace(path, "lengths", ("ts", "inp", "out"))
    named = write_csv(tmp_path, "a,b\n1,2\n", "named.csv")
    with pytest.raises(
        TraceReadError,
        match=r"line 1 \(header\): expected a column named 'inp'; the header "
        r"has 'a', 'b'",
    ):
        read_trace(named, "lengths", (None, "inp", "out"))


def test_header_only_and_empty_files_are_errors(tmp_path):
    with pytest.raises(TraceReadError, match=r"h\.csv: expected at least one data row after the header"):
        read_trace(write_csv(tmp_path, "ts,inp,out\n", "h.csv"), "lengths", ("ts", "inp", "out"))
    with pytest.raises(TraceReadError, match=r"e\.csv: expected a header row .* the file is empty"):
        read_trace(write_csv(tmp_path, "", "e.csv"), "lengths", ("ts", "inp", "out"))


def test_mooncake_json_error_names_the_file_line_not_orjsons(tmp_path):
    good = '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}\n'
    path = tmp_path / "m.jsonl"
    path.write_text(good * 25 + '{"timestamp": 1, "input_length": 5,,}\n')
    with pytest.raises(TraceReadError, match=r"m\.jsonl: line 26: expected a JSON object, column \d+"):
        read_trace(path, "mooncake")
    path.write_text(good + '{"timestamp": "x", "input_length": 5, "output_length": 1, "hash_ids": [0]}\n')
    with pytest.raises(TraceReadError, match=r"line 2: expected timestamp as a number of milliseconds"):
        read_trace(path, "mooncake")


def test_unsorted_mooncake_rows_carry_their_hash_ids(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"timestamp": 2000, "input_length": 5, "output_length": 1, "hash_ids": [0, 2]}\n'
        '{"timestamp": 0, "input_length": 6, "output_length": 2, "hash_ids": [0, 1]}\n'
    )
    rows = read_trace(path, "mooncake")
    assert rows.out_of_order == 1 and rows.t_s.tolist() == [0.0, 2.0]
    assert (
        rows.hash_ids == [[0, 1], [0, 2]] and rows.n_in.tolist() == [6, 5] and rows.lines.tolist() == [2, 1]
    )


def test_policy_keys_are_validated(write_scenario, tmp_path):
    write_csv(tmp_path, "ts,inp,out\n0,1,1\n")
    with pytest.raises(ScenarioError, match=r"trace\.on_bad_row: expected one of 'refuse', 'skip'"):
        load_scenario(write_scenario(TIMED + 'on_bad_row = "ignore"\n'))
    with pytest.raises(ScenarioError, match=r"trace\.order: expected one of 'time', 'file'"):
        load_scenario(write_scenario(TIMED + 'order = "random"\n', name="o.toml"))
