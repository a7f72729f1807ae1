"""Which directory a run starting now writes into (stats/rundir.py)."""

from __future__ import annotations

import os

import pytest

from loadkit.stats.rundir import claim_report_dir, default_report_dir


def test_a_given_directory_is_taken_when_new_or_empty_and_suffixed_otherwise(tmp_path):
    given = str(tmp_path / "r")
    assert claim_report_dir(given) == given and os.path.isdir(given)  # created at once
    assert claim_report_dir(given) == given  # still empty: nothing of a run is in it
    (tmp_path / "r" / "report.json").write_text("{}")
    assert claim_report_dir(given) == given + "-2"
    (tmp_path / "r-2" / "requests.jsonl").write_text("")
    (tmp_path / "r-3").write_text("a file, not a directory")
    assert claim_report_dir(given + "/") == given + "-4"
    assert (tmp_path / "r" / "report.json").read_text() == "{}"  # nothing earlier touched


def test_a_directory_an_earlier_run_of_this_process_took_is_not_taken_again_even_empty(tmp_path):
    given = str(tmp_path / "r")
    first = claim_report_dir(given)
    assert claim_report_dir(given, [os.path.abspath(first)]) == given + "-2"


def test_the_default_is_the_start_time_of_the_run_not_of_the_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    at = 1_780_000_000.0
    assert default_report_dir(at) == "reports/20260528-202640"
    assert claim_report_dir("", now=at) == "reports/20260528-202640"
    (tmp_path / "reports/20260528-202640/report.json").write_text("{}")
    assert claim_report_dir(None, now=at) == "reports/20260528-202640-2"  # two starts within one second
    assert claim_report_dir("", now=at + 61) == "reports/20260528-202741"


def test_a_directory_that_cannot_be_created_is_an_error_naming_it(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(OSError):
        claim_report_dir(str(tmp_path / "f" / "r"))
