"""`loadkit verify` on unusable input (exit 2, naming the file, line or flag), and the rule
that the oracle is independent of the code it checks: importing it loads no loadkit.stats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadkit.cli.dispatch import main
from loadkit.verify import VerifyInputError, load_run


def test_importing_the_oracle_loads_no_stats_module():
    code = ("import sys, loadkit.verify, loadkit.verify.cli, loadkit.verify.checks; "
            "print(sorted(m for m in sys.modules if m == 'loadkit.stats' or m.startswith('loadkit.stats.')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def _report_dir(tmp_path: Path, lines: list[str] | None) -> Path:
    (tmp_path / "report.json").write_text(json.dumps({"engines": {}, "manifest": {}, "conservation": {}}))
    if lines is not None:
        (tmp_path / "requests.jsonl").write_text("".join(line + "\n" for line in lines))
    return tmp_path


def _line(**fields: object) -> dict[str, object]:
    """A raw-log line with the fields verify needs (a failed request: no times but t_send)."""
    line: dict[str, object] = {"request_id": "a", "engine": "e", "label": "l", "outcome": "connect_error", "n_in": 3,
                               "n_out": None, "t_send_ns": 5, "t_first_ns": None, "t_last_ns": None, "t_end_ns": 9}  # fmt: skip
    return {**line, **fields}


def test_no_raw_log_names_the_flag(tmp_path, capsys):
    assert main(["verify", str(_report_dir(tmp_path, None))]) == 2
    err = capsys.readouterr().err
    assert "no raw log" in err and "--raw-log" in err


def test_no_report_names_the_file(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nothing")]) == 2
    assert "report.json" in capsys.readouterr().err


def test_a_bad_raw_log_line_is_named_by_file_and_line(tmp_path):
    good = json.dumps(_line())
    directory = _report_dir(tmp_path, [good, "{not json"])
    with pytest.raises(VerifyInputError, match="not a JSON line") as exc:
        load_run(directory)
    assert f"{directory / 'requests.jsonl'}:2: not a JSON line" in str(exc.value)
    (directory / "requests.jsonl").write_text(good + "\n" + json.dumps({"request_id": "x"}) + "\n")
    with pytest.raises(VerifyInputError, match=r"requests\.jsonl:2: raw-log line without 'engine'"):
        load_run(directory)


def test_a_field_of_the_wrong_type_is_named_by_file_and_line(tmp_path):
    directory = _report_dir(tmp_path, [json.dumps(_line(n_in="many"))])
    with pytest.raises(VerifyInputError, match=r"requests\.jsonl:1: 'n_in' is 'many', not an integer"):
        load_run(directory)


def test_a_lost_worker_is_said_beside_the_disagreements_it_causes(tmp_path, capsys):
    directory = _report_dir(tmp_path, [json.dumps(_line())])
    doc = {"engines": {}, "manifest": {}, "conservation": {"sent": 0, "outcomes_total": 0, "holds": False},
           "workers": {"count": 2, "lost": 1}}  # fmt: skip
    (directory / "report.json").write_text(json.dumps(doc))
    assert main(["verify", str(directory)]) == 1
    out = capsys.readouterr().out
    assert (
        "1 worker(s) lost" in out and "DISAGREES conservation / raw log / sent: report 0, recomputed 1" in out
    )
