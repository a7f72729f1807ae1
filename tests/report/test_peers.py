"""The peers' importers on real result files (tests/report/data/peers/, made by
benchmarks/peers/make_fixtures.sh): every figure is the file's own, format detected from content."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from loadkit.errors import UserError
from loadkit.report.compare import compare_runs
from loadkit.report.peers import PeerFormatError, detect, read_peer
from loadkit.report.peers.cli import main as import_main

DATA = Path(__file__).parent / "data" / "peers"
GUIDELLM = DATA / "guidellm-0.8.1" / "benchmarks.json"
AIPERF = DATA / "aiperf-0.13.0" / "profile_export_aiperf.json"


def test_guidellm_figures_are_the_files_own():
    raw = json.loads(GUIDELLM.read_text())
    bench = raw["benchmarks"][0]["metrics"]
    report = read_peer(GUIDELLM)
    assert report["source"] == {"tool": "guidellm", "version": "0.8.1", "file": str(GUIDELLM)}
    ((name, e),) = report["engines"].items()
    assert name == "guidellm"
    totals = bench["request_totals"]
    assert (e["requests"], e["ok"], e["failures"], e["cancelled"]) == (
        totals["total"],
        totals["successful"],
        totals["errored"],
        totals["incomplete"],
    )
    ttft = bench["time_to_first_token_ms"]["successful"]
    assert e["ttft_ms"]["p99"] == ttft["percentiles"]["p99"] and e["ttft_ms"]["count"] == ttft["count"]
    itl = bench["inter_token_latency_ms"]["successful"]  # GuideLLM's ITL is loadkit's TPOT formula
    assert e["tpot_ms"]["p50"] == itl["percentiles"]["p50"] and e["tpot_ms"]["mean"] == itl["mean"]
    lat = bench["request_latency"]["successful"]
    assert e["e2e_ms"]["p90"] == pytest.approx(lat["percentiles"]["p90"] * 1000)
    assert e["requests_per_s"] == bench["requests_per_second"]["total"]["mean"]
    assert e["output_tokens_per_s"] == bench["output_tokens_per_second"]["total"]["mean"]
    assert e["itl_ms"]["p50"] is None and e["goodput_per_s"] is None  # not measured, never 0
    assert "benchmarks[0].metrics.time_per_output_token_ms" in report["unmapped"]
    assert "tpot_ms" in report["definitions"] and "percentiles" in report["definitions"]


def test_aiperf_figures_are_the_files_own():
    raw = json.loads(AIPERF.read_text())
    report = read_peer(AIPERF)
    assert report["source"]["tool"] == "aiperf" and report["source"]["version"] == raw["aiperf_version"]
    e = report["engines"]["aiperf"]
    assert e["ok"] == raw["request_count"]["avg"] and e["failures"] == 0
    for ours, theirs in (
        ("ttft_ms", "time_to_first_token"),
        ("tpot_ms", "inter_token_latency"),
        ("e2e_ms", "request_latency"),
        ("itl_chunk_ms", "inter_chunk_latency"),
    ):
        for stat, key in (
            ("p50", "p50"),
            ("p90", "p90"),
            ("p99", "p99"),
            ("mean", "avg"),
            ("count", "count"),
        ):
            assert e[ours][stat] == raw[theirs][key], (ours, stat)
    assert e["ttft_ms"]["p999"] is None  # AIPerf has no p99.9
    assert e["requests_per_s"] == raw["request_throughput"]["avg"]
    assert e["output_tokens_per_s"] == raw["output_token_throughput"]["avg"]
    assert "time_to_second_token" in report["unmapped"] and "http_req_waiting" in report["unmapped"]


def test_format_is_detected_from_content_not_name(tmp_path):
    renamed = tmp_path / "results.dat"
    renamed.write_bytes(gzip.compress(AIPERF.read_bytes()))
    assert read_peer(renamed)["source"]["tool"] == "aiperf"
    assert detect(json.loads(GUIDELLM.read_text())).tool == "guidellm"


def test_unknown_format_names_the_file_and_what_was_expected(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"results": [1, 2]}')
    with pytest.raises(PeerFormatError) as exc:
        read_peer(other)
    assert isinstance(exc.value, UserError)
    assert str(other) in str(exc.value) and "GuideLLM benchmarks.json" in str(exc.value)
    assert "top-level keys: results" in str(exc.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(PeerFormatError, match="broken.json: not JSON"):
        read_peer(broken)


def test_import_writes_a_report_dir_compare_reads(tmp_path, capsys):
    assert import_main([str(GUIDELLM), "-o", str(tmp_path / "gl")]) == 0
    assert (tmp_path / "gl" / "report.html").is_file()
    written = json.loads((tmp_path / "gl" / "report.json").read_text())
    assert written["engines"]["guidellm"]["ttft_ms"] == read_peer(GUIDELLM)["engines"]["guidellm"]["ttft_ms"]
    assert "imported from guidellm 0.8.1" in capsys.readouterr().out
    result = compare_runs([str(tmp_path / "gl"), str(AIPERF)], with_raw=False)
    (pair,) = result["comparisons"]
    assert (pair["engine_a"], pair["engine_b"]) == ("guidellm", "aiperf")
    assert any(line.startswith("imported from aiperf 0.13.0") for line in pair["peer_notes"]["b"])
    ttft = next(r for r in pair["metrics"] if r["metric"] == "ttft_ms.p50")
    assert ttft["a"] == written["engines"]["guidellm"]["ttft_ms"]["p50"]
