"""Mooncake rows with fewer hash ids than their input_length needs: one rule in replay and inspect.

Before the rule, replay cut such a row to its ids' blocks (one id: a 512-token prompt) while
``loadkit traces inspect`` reported the row's own input_length (56,397).
"""

from __future__ import annotations

import json

import pytest

from loadkit.cli import main as loadkit_main
from loadkit.workload import ScenarioError, load_scenario
from loadkit.workload.tracereader import TraceReadError, read_trace


def write_trace(tmp_path, rows, name="m.jsonl"):
    path = tmp_path / name
    path.write_text(
        "".join(
            json.dumps(dict(zip(("timestamp", "input_length", "output_length", "hash_ids"), r, strict=True)))
            + "\n"
            for r in rows
        )
    )
    return path


ROWS = [
    (0, 900, 4, [0, 1]),  # 900 tokens: two 512-token blocks, as it should
    (1000, 56_397, 4, [0]),  # one id for 56,397 tokens: short (needs 111)
    (2000, 700, 4, [0, 2]),
]


def inspect_json(capsys, *args: str) -> dict:
    assert loadkit_main(["traces", "inspect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def scenario_text(path, extra=""):
    return f'[arrival]\nmodel = "trace"\n[trace]\nformat = "mooncake"\npath = "{path}"\n{extra}'


def test_short_row_is_refused_naming_file_line_and_values(tmp_path, write_scenario, capsys):
    path = write_trace(tmp_path, ROWS)
    message = (
        r"m\.jsonl: line 2: input_length 56397 needs 111 hash_ids of 512 tokens \(block_tokens\), "
        r"the row has 1 \(covering 512 tokens\); 1 of 3 rows have too few hash_ids \(lines 2\) "
        r"\(on_bad_row = \"skip\" drops such rows .* \"pad\" gives"
    )
    with pytest.raises(TraceReadError, match=message):
        read_trace(path, "mooncake")
    with pytest.raises(ScenarioError, match=r"trace\.path: .*" + message):
        load_scenario(write_scenario(scenario_text(path)))
    assert loadkit_main(["traces", "inspect", str(path)]) == 2
    assert "line 2: input_length 56397 needs 111 hash_ids" in capsys.readouterr().err


def test_every_short_row_is_counted_in_the_refusal(tmp_path):
    rows = [(i * 1000, 600 if i % 2 else 100, 1, [0]) for i in range(9)]  # the odd lines need 2 ids
    with pytest.raises(
        TraceReadError, match=r"line 2: .*; 4 of 9 rows have too few hash_ids \(lines 2, 4, 6, 8\)"
    ):
        read_trace(write_trace(tmp_path, rows), "mooncake")
    empty = [(0, 10, 1, [0]), (1000, 0, 1, [])]  # replay sends at least one token: one block
    with pytest.raises(TraceReadError, match=r"line 2: input_length 0 needs 1 hash_ids .* the row has 0"):
        read_trace(write_trace(tmp_path, empty, "e.jsonl"), "mooncake")


def test_skip_drops_and_counts_them_in_replay_and_inspect_alike(tmp_path, write_scenario, capsys):
    path = write_trace(tmp_path, ROWS)
    src = load_scenario(write_scenario(scenario_text(path, 'on_bad_row = "skip"\n'))).request_source()
    sent = [req.n_in_target for req in iter(src.next_item, None)]
    assert sent == [900, 700]
    assert src.realised()["trace_load"]["skipped_bad_rows"] == {"too few hash_ids": 1}
    assert any("1 bad rows skipped" in n and "too few hash_ids: 1" in n for n in src.load_notes())
    r = inspect_json(capsys, str(path), "--on-bad-row", "skip")
    assert r["requests"] == len(sent) and r["input_tokens"]["max"] == max(sent)
    assert r["load"]["skipped_bad_rows"] == {"too few hash_ids": 1}


def test_pad_sends_the_rows_length_with_blocks_of_its_own(tmp_path, write_scenario, capsys):
    rows = [(0, 8, 1, [0, 1]), (1000, 23, 2, [0]), (2000, 8, 1, [-3, 7])]  # block_tokens 4: row 2 needs 6
    path = write_trace(tmp_path, rows)
    read = read_trace(path, "mooncake", on_bad_row="pad", block_tokens=4)
    assert read.hash_ids is not None and read.hash_ids[1][:1] == [0] and len(read.hash_ids[1]) == 6
    pads = read.hash_ids[1][1:]
    assert len(set(pads)) == 5 and all(p < -3 for p in pads)  # below every id in the file: shared with none
    assert read.padded == 1 and read.load_summary()["padded_short_rows"] == 1
    sc = load_scenario(write_scenario(scenario_text(path, 'on_bad_row = "pad"\nblock_tokens = 4\n')))
    src = sc.request_source()
    reqs = list(iter(src.next_item, None))
    assert [r.n_in_target for r in reqs] == [8, 23, 8]
    assert [len(r.messages[0]["content"].split()) for r in reqs] == [8, 23, 8]
    assert any(
        "1 rows have fewer hash_ids than their input_length needs; padded" in n for n in src.load_notes()
    )
    r = inspect_json(capsys, str(path), "--on-bad-row", "pad", "--block-tokens", "4")
    assert r["requests"] == 3 and r["input_tokens"]["max"] == 23 and r["load"]["padded_short_rows"] == 1
    assert r["prefix_sharing"]["blocks"] == 2 + 6 + 2  # the padded blocks count, as in replay


def test_block_tokens_decides_what_is_short(tmp_path, write_scenario):
    path = write_trace(tmp_path, [(0, 900, 4, [0, 1])])
    src = load_scenario(write_scenario(scenario_text(path))).request_source()
    assert [r.n_in_target for r in iter(src.next_item, None)] == [900]
    with pytest.raises(ScenarioError, match=r"input_length 900 needs 4 hash_ids of 256 tokens"):
        load_scenario(write_scenario(scenario_text(path, "block_tokens = 256\n"), name="b.toml"))


def test_pad_is_for_mooncake_only(tmp_path, write_scenario):
    (tmp_path / "t.csv").write_text("ts,inp,out\n0,1,1\n")
    body = (
        '[arrival]\nmodel = "trace"\n[trace]\nformat = "lengths"\npath = "t.csv"\ntimestamp_column = "ts"\n'
        'input_column = "inp"\noutput_column = "out"\non_bad_row = "pad"\n'
    )
    with pytest.raises(
        ScenarioError, match=r"trace\.on_bad_row: expected \"pad\" only with format 'mooncake'"
    ):
        load_scenario(write_scenario(body))
    with pytest.raises(TraceReadError, match=r"t\.csv: on_bad_row = \"pad\" is for Mooncake rows"):
        read_trace(tmp_path / "t.csv", "lengths", ("ts", "inp", "out"), on_bad_row="pad")


def test_a_day_long_silence_between_rows_is_named(tmp_path, write_scenario, capsys):
    day_ms = 86_400_000
    path = write_trace(tmp_path, [(0, 10, 1, [0]), (1000, 10, 1, [0]), (400 * day_ms + 1000, 10, 1, [0])])
    src = load_scenario(write_scenario(scenario_text(path))).request_source()
    assert any("m.jsonl: line 3: 400.0 days after the row before it (line 2)" in n for n in src.load_notes())
    assert loadkit_main(["traces", "inspect", str(path)]) == 0
    assert "warning: " in (text := capsys.readouterr().out) and "400.0 days after the row before it" in text
    assert read_trace(write_trace(tmp_path, ROWS[:1] + ROWS[2:], "ok.jsonl"), "mooncake").notes() == []


def test_capacity_reads_the_rows_under_the_same_rule(tmp_path, capsys):
    from loadkit.capacity.lengths import CapacityError, read_lengths

    path = write_trace(tmp_path, ROWS)
    with pytest.raises(CapacityError, match=r"m\.jsonl: line 2: input_length 56397 needs 111 hash_ids"):
        read_lengths(path)
    assert read_lengths(path, on_bad_row="skip").skipped == {"too few hash_ids": 1}
    padded = read_lengths(path, on_bad_row="pad")
    assert sorted(padded.lengths.tolist()) == [704, 904, 56_401]  # input + output, the short row whole
    assert (
        padded.prefix is not None and padded.prefix.unique_tokens == (3 + 110) * 512
    )  # ids 0, 1, 2 and 110 pads
    code = loadkit_main(
        ["capacity", "--model", "llama-3-8b", "--lengths-from", str(path), "--on-bad-row", "pad"]
    )
    assert code == 0, capsys.readouterr().err
