"""A Mooncake trace with a short row (too few hash_ids) replayed for real against the simulator."""

from __future__ import annotations

import json

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import check_conservation, raw_records, run_locust, truth_for

pytestmark = pytest.mark.integration


def test_padded_short_row_reaches_the_server_at_its_input_length(tmp_path):
    """The row of 300 tokens with one 16-token id used to be sent as a 16-token prompt (while
    `traces inspect` said 300); with on_bad_row = "pad" the server counts 300, and the run says
    the row was padded."""
    rows = [
        (0, 40, 3, [0, 1, 2]),
        (100, 300, 3, [0]),
        (200, 20, 3, [0, 5]),
    ]  # block_tokens 16: row 2 needs 19
    (tmp_path / "m.jsonl").write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": o, "hash_ids": ids}) + "\n"
            for t, n, o, ids in rows
        )
    )
    scenario = tmp_path / "pad.toml"
    scenario.write_text(
        'schema = "loadkit.scenario/1"\nname = "pad"\nseed = 1\n[arrival]\nmodel = "trace"\n'
        '[prompt]\nshape = "prompt"\n[trace]\nformat = "mooncake"\npath = "m.jsonl"\nblock_tokens = 16\n'
        'on_bad_row = "pad"\n'
    )
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust(
            "--headless", "-u", "2", "-r", "2", "-t", "4s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "openai", "--api", "completions",
            "--scenario", str(scenario), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    sent = sorted(raw_records(report_dir), key=lambda r: r["t_sched_ns"])
    assert [r["outcome"] for r in sent] == ["ok"] * 3
    assert [r["n_in_target"] for r in sent] == [40, 300, 20]
    assert [truth[r["request_id"]]["prompt_tokens"] for r in sent] == [40, 300, 20]
    assert any(
        "1 rows have fewer hash_ids than their input_length needs; padded" in w for w in report["warnings"]
    ), report["warnings"]
