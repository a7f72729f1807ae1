"""The oracle's ServeGen per-window check can fail: a real run's report.json (gzipped in
data/servegen_run: chunk-1 of the shipped language-m-mid sample, file seconds 81600-82500 at
speed 100 against ``loadkit sim --profile fast``, 71 requests; the scenario beside it)
verifies, and each wrong per-window figure makes ``loadkit verify`` exit 1 naming it. Fast:
no run, the files are read in-process."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadkit.verify.cli import main
from loadkit.workload.paths import PACKAGE_DATA

DATA = Path(__file__).resolve().parent / "data" / "servegen_run"
TRACE = PACKAGE_DATA / "traces" / "servegen" / "language-m-mid" / "chunk-1-trace.csv"
KEY = "delivered / openai / trace / servegen"


def _table(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["delivered"]["by_target"]["openai"]["stages"]["trace"]["servegen"]


def _copy(tmp_path: Path, change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    doc = json.loads(gzip.decompress((DATA / "report.json.gz").read_bytes()))
    _table(doc)["trace"] = str(TRACE)  # the run's checkout named its own copy of the shipped file
    if change is not None:
        change(doc)
    (out / "report.json").write_text(json.dumps(doc))
    (out / "requests.jsonl").write_bytes(gzip.decompress((DATA / "requests.jsonl.gz").read_bytes()))
    return out


def test_the_real_run_verifies_per_window(tmp_path, capsys):
    assert main([str(_copy(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "DISAGREES" not in out
    assert "not checked: delivered servegen windows' asked side (synthesised CV" in out


def _window(i: int, part: str, figure: str, factor: float) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        _table(doc)["windows"][i][part][figure] *= factor

    return change


@pytest.mark.parametrize(
    ("change", "figure"),
    [
        (_window(0, "realised", "cv", 1.01), "81600 / realised.cv"),
        (_window(1, "realised", "rate", 1.01), "82200 / realised.rate"),
        (_window(0, "file", "cv", 1.3), "81600 / file.cv"),
        (_window(1, "file", "rate", 0.9), "82200 / file.rate"),
        (_window(0, "synthesised", "rate", 1.01), "81600 / synthesised.rate"),
    ],
)
def test_a_wrong_window_figure_is_named(tmp_path, capsys, change, figure):
    assert main([str(_copy(tmp_path, change))]) == 1
    assert f"DISAGREES {KEY} / {figure}: report" in capsys.readouterr().out


def test_a_window_moved_or_miscounted_is_named(tmp_path, capsys):
    def shift(doc: dict[str, Any]) -> None:
        _table(doc)["windows"][0]["realised"]["arrivals"] -= 1
        _table(doc)["windows"][1]["start_s"] = 82800.0

    assert main([str(_copy(tmp_path, shift))]) == 1
    out = capsys.readouterr().out
    assert f"DISAGREES {KEY} / 81600 / realised.arrivals: report 47, recomputed 48" in out
    assert f"DISAGREES {KEY} / window starts (a prefix of the file's in the cut)" in out


def test_a_synthesis_called_faithful_when_it_is_not(tmp_path, capsys):
    def tighter(doc: dict[str, Any]) -> None:
        _table(doc)["cv_tolerance"] = 0.01  # 1.69 vs the file's 1.74 is 3 % off: not faithful at 1 %

    assert main([str(_copy(tmp_path, tighter))]) == 1
    assert (
        f"DISAGREES {KEY} / 81600 / synthesis.faithful: report True, recomputed False"
        in capsys.readouterr().out
    )


def test_a_dropped_window_table_is_named(tmp_path, capsys):
    def gone(doc: dict[str, Any]) -> None:
        del doc["delivered"]["by_target"]["openai"]["stages"]["trace"]["servegen"]

    assert main([str(_copy(tmp_path, gone))]) == 1
    assert (
        "DISAGREES delivered / * / ServeGen stages with per-window rows: report False"
        in capsys.readouterr().out
    )


def test_a_trace_named_at_another_path_is_checked_against_the_scenarios(tmp_path, capsys):
    def elsewhere(doc: dict[str, Any]) -> None:
        _table(doc)["trace"] = "/elsewhere/chunk-1-trace.csv"

    assert main([str(_copy(tmp_path, elsewhere))]) == 0
    out = capsys.readouterr().out
    assert (
        "not checked: delivered openai / trace / servegen against the trace the report names, /elsewhere/"
        in out
    )
    assert f"checked against {TRACE.resolve()}" in out


def test_a_truncated_stage_is_not_checked_per_window_on_the_realised_side(tmp_path, capsys):
    def kept_a_prefix(doc: dict[str, Any]) -> None:
        row = doc["delivered"]["by_target"]["openai"]["stages"]["trace"]
        row["requests"] -= 5
        row["truncated_requests"] = 5
        _table(doc)["windows"][1]["realised"]["arrivals"] -= 5

    assert main([str(_copy(tmp_path, kept_a_prefix))]) == 0
    out = capsys.readouterr().out
    assert "delivered openai / trace / servegen realised per window because the section kept a prefix" in out
