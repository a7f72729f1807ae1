"""The Benchmark Report files (loadkit/report/llmdfiles.py): names llm-d-benchmark looks for,
YAML it reads, nothing written when a document fails the schema, and the end-of-run writer that
runs only when --report-format llmd-br asked for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadkit.report import llmd, llmdfiles
from loadkit.report.llmd import LlmdReportError, schema_errors
from loadkit.report.llmdfiles import file_name, loadkit_write_report, write_llmd_reports

yaml = pytest.importorskip("yaml")
RECORDED = Path(__file__).parent / "data" / "llmd_two_targets_report.json"
NAMES = ["benchmark_report_v0.2,_loadkit_fast.yaml", "benchmark_report_v0.2,_loadkit_sglang-b.yaml"]


@pytest.fixture
def report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data


def _written(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("benchmark_report*"))


def test_one_yaml_file_per_target_that_pyyaml_reads_and_the_schema_accepts(report, tmp_path):
    paths = write_llmd_reports(report, str(tmp_path))
    assert [Path(p).name for p in paths] == NAMES == _written(tmp_path)
    for path in paths:
        document = yaml.safe_load(Path(path).read_text())
        assert schema_errors(document) == []
        assert document["version"] == "0.2"
    assert file_name("a b/c") == "benchmark_report_v0.2,_loadkit_a_b_c.yaml"


def test_one_target_to_a_named_file_json_or_yaml(report, tmp_path):
    out = tmp_path / "fast.json"
    write_llmd_reports(report, str(tmp_path), out=str(out), engine="fast")
    assert json.loads(out.read_text())["scenario"]["stack"][0]["metadata"]["label"] == "fast"
    with pytest.raises(LlmdReportError, match="2 targets .*choose one with --target"):
        write_llmd_reports(report, str(tmp_path), out=str(tmp_path / "x.yaml"))
    with pytest.raises(LlmdReportError, match="no target 'nope'"):
        write_llmd_reports(report, str(tmp_path), engine="nope")


def test_nothing_is_written_when_a_document_fails_the_schema(report, tmp_path, monkeypatch):
    monkeypatch.setattr(llmd, "LATENCIES", (("ttft_ms", "time_to_first_token", "seconds"),))
    with pytest.raises(LlmdReportError, match="target 'fast': not a valid Benchmark Report"):
        write_llmd_reports(report, str(tmp_path))
    assert _written(tmp_path) == []


def test_the_run_writer_writes_only_at_the_final_write_and_only_when_asked(report, tmp_path, capsys):
    report["manifest"]["report_formats"] = []
    loadkit_write_report(report=report, report_dir=str(tmp_path), final=True)
    assert _written(tmp_path) == []
    report["manifest"]["report_formats"] = ["llmd-br"]
    loadkit_write_report(report=report, report_dir=str(tmp_path), final=False)
    assert _written(tmp_path) == []
    loadkit_write_report(report=report, report_dir=str(tmp_path), final=True)
    assert _written(tmp_path) == NAMES
    assert "loadkit: llm-d Benchmark Report" in capsys.readouterr().out


def test_the_run_writer_logs_a_failure_and_does_not_crash_the_run(report, tmp_path, monkeypatch, caplog):
    report["manifest"]["report_formats"] = ["llmd-br"]
    monkeypatch.setattr(llmd, "LATENCIES", (("ttft_ms", "time_to_first_token", "seconds"),))
    loadkit_write_report(report=report, report_dir=str(tmp_path), final=True)
    assert _written(tmp_path) == []
    assert (
        "llm-d Benchmark Report not written" in caplog.text
        and "loadkit report --format llmd-br" in caplog.text
    )


def test_it_is_a_builtin_writer():
    from loadkit.plugins import BUILTIN_PLUGINS

    assert llmdfiles.__name__ in BUILTIN_PLUGINS


def test_loadkit_report_format_llmd_br_on_the_command_line(report, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(RECORDED, folder / "report.json")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "loadkit", "report", "--format", "llmd-br", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    proc = cli(str(folder))
    assert proc.returncode == 0, proc.stderr
    assert _written(folder) == NAMES and proc.stdout.count("llm-d Benchmark Report: ") == 2
    proc = cli(str(folder / "report.json"), "--target", "sglang-b", "-o", str(tmp_path / "b.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert (
        yaml.safe_load((tmp_path / "b.yaml").read_text())["scenario"]["stack"][0]["standardized"]["tool"]
        == "sglang"
    )
    proc = cli(str(folder), "-o", str(tmp_path / "both.yaml"))
    assert proc.returncode != 0 and "choose one with --target" in proc.stderr
    assert not (tmp_path / "both.yaml").exists()
