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


GENAI_DIR = DATA / "genai-bench-0.0.5"
GENAI_RUN = GENAI_DIR / "D64_32_text-to-text_num_concurrency_2_time_2s.json"
GENAI_META = GENAI_DIR / "experiment_metadata.json"


def test_genai_bench_figures_are_the_files_own_in_ms():
    raw = json.loads(GENAI_RUN.read_text())
    agg, stats = raw["aggregated_metrics"], raw["aggregated_metrics"]["stats"]
    assert raw["_time_unit"] == "s"  # the fixture holds seconds: the importer converts to ms
    report = read_peer(GENAI_RUN)
    assert report["source"] == {"tool": "genai-bench", "version": "0.0.5", "file": str(GENAI_RUN)}
    e = report["engines"]["genai-bench"]
    assert (e["requests"], e["ok"], e["failures"]) == (
        agg["num_requests"],
        agg["num_completed_requests"],
        agg["num_error_requests"],
    )
    for ours, theirs in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2e_latency")):
        for stat in ("mean", "min", "max", "p50", "p90", "p95", "p99"):
            assert e[ours][stat] == pytest.approx(stats[theirs][stat] * 1000, rel=1e-12), (ours, stat)
        assert e[ours]["p999"] is None  # genai-bench has no p99.9
        assert e[ours]["count"] == len(raw["individual_request_metrics"])
    assert (
        e["n_out"]["p50"] == stats["num_output_tokens"]["p50"]
        and e["output_tokens"] == stats["num_output_tokens"]["sum"]
    )
    assert e["window_s"] == agg["run_duration"] and e["requests_per_s"] == agg["requests_per_second"]
    assert e["output_tokens_per_s"] == agg["mean_output_throughput_tokens_per_s"]
    assert e["itl_ms"]["p50"] is None and e["goodput_per_s"] is None
    # what has no place in loadkit's schema is listed, leaf by leaf where a stat is left out
    for path in (
        "aggregated_metrics.stats.output_inference_speed",
        "aggregated_metrics.stats.ttft.p25",
        "aggregated_metrics.stats.tpot.stddev",
        "aggregated_metrics.error_codes_frequency",
        "experiment_metadata.json:server_engine",
    ):
        assert path in report["unmapped"], path
    assert not any(p.startswith(("aggregated_metrics.stats.ttft.p50", "aggregated_metrics.run_duration"))
                   for p in report["unmapped"])  # fmt: skip
    assert "output_tokens_per_s" in report["definitions"] and "tpot_ms" in report["definitions"]


def test_genai_bench_experiment_metadata_reads_the_runs_beside_it(tmp_path):
    report = read_peer(GENAI_META)
    assert (
        report["engines"]["genai-bench"]["ttft_ms"]
        == read_peer(GENAI_RUN)["engines"]["genai-bench"]["ttft_ms"]
    )
    assert report["manifest"]["load"] == "traffic scenario D(64,32), num_concurrency 2"
    lonely = tmp_path / "experiment_metadata.json"
    lonely.write_bytes(GENAI_META.read_bytes())
    with pytest.raises(
        PeerFormatError, match=r"experiment_metadata.json: genai-bench's experiment metadata, but no run"
    ):
        read_peer(lonely)
    # a run file alone: the figures still import, the version is not recorded
    alone = tmp_path / "run" / GENAI_RUN.name
    alone.parent.mkdir()
    alone.write_bytes(GENAI_RUN.read_bytes())
    assert read_peer(alone)["source"]["version"] is None


def test_truncated_peer_files_name_the_file(tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_bytes(GENAI_RUN.read_bytes()[:5000])
    with pytest.raises(PeerFormatError, match=r"cut.json: not JSON"):
        read_peer(cut)
    broken = tmp_path / "run.json"
    data = json.loads(GENAI_RUN.read_text())
    del data["aggregated_metrics"]["run_duration"]
    broken.write_text(json.dumps(data))
    with pytest.raises(PeerFormatError, match=r"run.json: looks like genai-bench's output but lacks what it needs: "
                       r"KeyError: 'run_duration'"):  # fmt: skip
        read_peer(broken)


VLLM = DATA / "vllm-0.33.0" / "vllm-bench-serve.json"
SGLANG = DATA / "sglang-0.5.23" / "sglang-bench-serving.jsonl"
FLAT = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl"}  # vLLM and SGLang: {stat}_{name}_ms


def _ok_counts(raw):
    ok = [i for i, e in enumerate(raw["errors"]) if not e]
    return sum(1 for i in ok if raw["output_lens"][i] > 1), sum(len(raw["itls"][i]) for i in ok)


def test_vllm_figures_are_the_files_own():
    raw = json.loads(VLLM.read_text())
    report = read_peer(VLLM)
    assert report["source"] == {"tool": "vllm", "version": None, "file": str(VLLM)}  # the file records none
    e = report["engines"]["vllm"]
    assert (e["requests"], e["ok"], e["failures"]) == (
        raw["completed"] + raw["failed"],
        raw["completed"],
        raw["failed"],
    )
    for ours, theirs in {**FLAT, "e2e_ms": "e2el"}.items():
        for stat, key in (("mean", "mean"), ("p50", "median"), ("p90", "p90"), ("p99", "p99")):
            assert e[ours][stat] == raw[f"{key}_{theirs}_ms"], (ours, stat)
        assert (
            e[ours]["p95"] is None and e[ours]["p999"] is None
        )  # not asked for with --metric-percentiles 50,90,99
    tpot_count, itl_count = _ok_counts(raw)
    assert (e["tpot_ms"]["count"], e["itl_ms"]["count"], e["ttft_ms"]["count"]) == (tpot_count, itl_count, 20)
    assert itl_count == 20 * 31  # one ITL value per chunk after the first: 31 for each 32-token answer
    assert e["window_s"] == raw["duration"] and e["requests_per_s"] == raw["request_throughput"]
    assert (
        e["output_tokens_per_s"] == raw["output_throughput"]
        and e["output_tokens"] == raw["total_output_tokens"]
    )
    assert e["n_out"]["mean"] == raw["total_output_tokens"] / raw["completed"]
    assert report["unmapped"] == [
        "burstiness", "date", "endpoint_type", "generated_texts", "label", "latencies", "max_concurrent_requests",
        "max_output_tokens_per_s", "num_prompts", "queue_times", "request_goodput", "rtfx", "start_times",
        "std_e2el_ms", "std_itl_ms", "std_tpot_ms", "std_ttft_ms", "tokenizer_id", "total_token_throughput",
    ]  # fmt: skip
    assert "one value per streamed chunk" in report["definitions"]["itl_ms"]


def test_sglang_figures_are_the_files_own():
    raw = json.loads(SGLANG.read_text(), parse_constant=float)  # SGLang writes "request_rate": Infinity
    report = read_peer(SGLANG)
    assert report["source"] == {"tool": "sglang", "version": None, "file": str(SGLANG)}
    e = report["engines"]["sglang"]
    assert (e["requests"], e["ok"], e["failures"]) == (len(raw["errors"]), raw["completed"], 0)
    for ours, theirs in {**FLAT, "e2e_ms": "e2e_latency"}.items():
        for stat, key in (
            ("mean", "mean"),
            ("p50", "median"),
            ("p90", "p90"),
            ("p95", "p95"),
            ("p99", "p99"),
        ):
            assert e[ours][stat] == raw[f"{key}_{theirs}_ms"], (ours, stat)
        assert e[ours]["p999"] is None and e[ours]["max"] is None
    assert (e["tpot_ms"]["count"], e["itl_ms"]["count"]) == _ok_counts(raw)
    assert (
        e["requests_per_s"] == raw["request_throughput"]
        and e["output_tokens_per_s"] == raw["output_throughput"]
    )
    assert (
        report["manifest"]["load"]
        == "backend sglang, max_concurrency 2, request_rate inf, dataset random-ids"
    )
    assert report["unmapped"] == [
        "accept_length", "concurrency", "generated_texts", "input_throughput", "max_concurrent_requests",
        "max_output_tokens_per_s", "random_input_len", "random_output_len", "random_range_ratio", "server_info",
        "sharegpt_output_len", "std_e2e_latency_ms", "std_itl_ms", "std_tpot_ms", "std_ttft_ms", "tag",
        "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens_retokenized", "total_throughput",
    ]  # fmt: skip


def test_sglang_appended_runs_are_one_engine_each_and_a_cut_line_is_named(tmp_path):
    line = SGLANG.read_bytes().strip()
    two = tmp_path / "two.jsonl"  # bench_serving appends a line per run to the same --output-file
    two.write_bytes(line + b"\n" + line.replace(b'"max_concurrency": 2', b'"max_concurrency": 4') + b"\n")
    report = read_peer(two)
    assert list(report["engines"]) == ["sglang[0] rate=inf concurrency=2", "sglang[1] rate=inf concurrency=4"]
    assert "[1].std_ttft_ms" in report["unmapped"]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(line + b"\n" + line[: len(line) // 2] + b"\n")
    with pytest.raises(PeerFormatError, match=r"cut.jsonl: line 2: not JSON .*JSON Lines"):
        read_peer(cut)
    lacking = tmp_path / "lacking.jsonl"
    lacking.write_bytes(line.replace(b'"completed"', b'"completed_x"'))
    with pytest.raises(
        PeerFormatError, match=r"lacking.jsonl: looks like sglang's output but lacks .*'completed'"
    ):
        read_peer(lacking)


def test_vllm_truncated_or_lacking_names_the_file(tmp_path):
    cut = tmp_path / "vllm.json"
    cut.write_bytes(VLLM.read_bytes()[:1500])
    with pytest.raises(PeerFormatError, match=r"vllm.json: not JSON"):
        read_peer(cut)
    data = json.loads(VLLM.read_text())
    del data["failed"]
    cut.write_text(json.dumps(data))
    with pytest.raises(
        PeerFormatError, match=r"vllm.json: looks like vllm's output but lacks what it needs: KeyError"
    ):
        read_peer(cut)
    assert detect(json.loads(VLLM.read_text())).tool == "vllm"


def test_each_fixture_is_detected_as_its_own_tool_and_a_genai_folder_is_read(tmp_path):
    tools = {
        GUIDELLM: "guidellm",
        AIPERF: "aiperf",
        VLLM: "vllm",
        SGLANG: "sglang",
        GENAI_RUN: "genai-bench",
        GENAI_META: "genai-bench",
    }
    for file, tool in tools.items():
        assert read_peer(file)["source"]["tool"] == tool, file
    # genai-bench's experiment folder stands for its metadata file, in compare and import alike
    result = compare_runs([str(VLLM), str(GENAI_DIR)], with_raw=False)
    (pair,) = result["comparisons"]
    assert (pair["engine_a"], pair["engine_b"]) == ("vllm", "genai-bench")
    assert import_main([str(GENAI_DIR), "-o", str(tmp_path / "gb"), "--no-html"]) == 0
    assert json.loads((tmp_path / "gb" / "report.json").read_text())["source"]["file"] == str(GENAI_META)
    with pytest.raises(PeerFormatError, match=r"a folder, and not one loadkit can import"):
        read_peer(tmp_path)
