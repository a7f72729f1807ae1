"""The raw-log fields the oracle gained (max_tokens, t_last_answer_ns, t_wall_offset_ns) and the
session log beside it make checks exact that were left out; raw logs written before them still verify, and say what they
could not check. The runs are data/asked_runs (test_verify_asked.py); fast, no run."""

from __future__ import annotations

import json

import pytest

from loadkit.verify.cli import main
from loadkit.verify.figures import slo_value_ns
from loadkit.verify.rawlog import VerifyInputError, load_run
from tests.verify.test_verify_asked import _copy

NEW_FIELDS = ("max_tokens", "t_last_answer_ns", "t_wall_offset_ns")


def test_output_asked_is_recomputed_from_max_tokens(tmp_path, capsys):
    def longer(doc):
        doc["lengths"]["by_target"]["chat"]["output_asked"]["mean"] *= 1.01

    assert main(["-q", str(_copy(tmp_path, "classes", longer))]) == 1
    assert "DISAGREES lengths / chat / output_asked.mean: report" in capsys.readouterr().out


def test_answer_tpot_is_judged_from_the_last_answer_time():
    r = {"t_first_answer_ns": 1_000, "t_last_answer_ns": 4_001, "n_answer": 4}
    assert slo_value_ns(r, "answer_tpot_ms", {}) == 1_000  # 3001 / 3, rounded half up to whole ns
    assert slo_value_ns({**r, "t_last_answer_ns": 4_002}, "answer_tpot_ms", {}) == 1_001
    assert slo_value_ns({**r, "n_answer": 1}, "answer_tpot_ms", {}) is None
    old = {k: v for k, v in r.items() if k != "t_last_answer_ns"}
    assert slo_value_ns(old, "answer_tpot_ms", {}) == "unknown"


def _moved(doc, column):
    """One count moved to the next second: the column's total stays, its seconds do not."""
    ts = doc["engines"]["chat"]["timeseries"]
    at = next(i for i, n in enumerate(ts[column]) if n > 0 and i + 1 < len(ts[column]))
    ts[column][at] -= 1
    ts[column][at + 1] += 1
    return ts["unix"][at]


def test_the_timeseries_is_checked_second_by_second_on_the_lines_wall_clock(tmp_path, capsys):
    assert main(["-q", str(_copy(tmp_path, "shape", lambda d: _moved(d, "ok")))]) == 1
    assert "DISAGREES timeseries / chat / ok per second: report" in capsys.readouterr().out

    def busier(doc):
        doc["engines"]["chat"]["timeseries"]["in_flight"][1] += 0.01

    (tmp_path / "b").mkdir()
    assert main(["-q", str(_copy(tmp_path / "b", "shape", busier))]) == 1
    out = capsys.readouterr().out
    unix = json.loads((tmp_path / "b" / "shape" / "report.json").read_text())["engines"]["chat"][
        "timeseries"
    ]["unix"]
    assert f"DISAGREES timeseries / chat / in_flight at unix {unix[1]}: report" in out, out


def test_how_sessions_ended_is_checked_from_the_session_log(tmp_path, capsys):
    def one_more_completed(doc):
        doc["sessions"]["agent"]["completed"] += 1

    assert main(["-q", str(_copy(tmp_path, "classes", one_more_completed))]) == 1
    assert "DISAGREES sessions / agent / completed: report" in capsys.readouterr().out

    def stopped_as_failed(doc):
        broken_by = doc["sessions"]["agent"]["broken_by"]
        broken_by["http_error:503"] = broken_by.pop("cancelled")

    (tmp_path / "b").mkdir()
    assert main(["-q", str(_copy(tmp_path / "b", "classes", stopped_as_failed))]) == 1
    assert "DISAGREES sessions / agent / broken_by: report" in capsys.readouterr().out


def test_a_raw_log_from_before_the_new_fields_still_verifies(tmp_path, capsys):
    run = _copy(tmp_path, "classes")
    (run / "sessions.jsonl").unlink()
    path = run / "requests.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k not in NEW_FIELDS}) + "\n" for r in rows)
    )
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "not checked: lengths chat output_asked because the raw log has no max_tokens" in out, out
    assert "not checked: timeseries per second because " in out, out
    assert (
        "not checked: sessions completed / broken / broken_by / broken_at_turn / ended_by because the run has no"
        in out
    )


def test_a_wall_offset_of_the_wrong_type_is_named(tmp_path):
    run = _copy(tmp_path, "classes")
    path = run / "requests.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["t_wall_offset_ns"] = "soon"
    path.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    with pytest.raises(
        VerifyInputError, match=r"requests\.jsonl:1: 't_wall_offset_ns' is 'soon', not an integer"
    ):
        load_run(run)
