"""The llm-d Benchmark Report mapping (loadkit/report/llmd.py) on a recorded report.json: two
targets, open-loop Poisson at 20/s, checked against llm-d-benchmark's own v0.2 JSON Schema."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from loadkit.report import llmd
from loadkit.report.llmd import LlmdReportError, benchmark_reports, check, schema_errors, sequence_length

RECORDED = Path(__file__).parent / "data" / "llmd_two_targets_report.json"


@pytest.fixture
def report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data


def test_the_schema_is_the_copied_v0_2_file_with_its_license():
    schema = llmd.load_schema()
    assert schema["title"] == "Benchmark Report v0.2"
    assert set(schema["required"]) == {"run", "results"}
    folder = llmd.SCHEMA_PATH.parent
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "llm-d/llm-d-benchmark" in (folder / "README.md").read_text()


def test_every_target_gets_a_valid_report(report):
    documents = benchmark_reports(report)
    assert set(documents) == {"fast", "sglang-b"}
    for document in documents.values():
        assert schema_errors(document) == []
    # One experiment, one report each.
    assert documents["fast"]["run"]["eid"] == documents["sglang-b"]["run"]["eid"]
    assert documents["fast"]["run"]["uid"] != documents["sglang-b"]["run"]["uid"]


def test_latencies_are_loadkits_figures_in_seconds(report):
    document = benchmark_reports(report)["sglang-b"]
    section = report["engines"]["sglang-b"]
    latency = document["results"]["request_performance"]["aggregate"]["latency"]
    for ours, theirs, units in llmd.LATENCIES:
        stats = latency[theirs]
        assert stats["units"] == units
        assert stats["mean"] == pytest.approx(section[ours]["mean"] / 1e3)
        assert stats["p50"] == pytest.approx(section[ours]["p50"] / 1e3)
        assert stats["p99p9"] == pytest.approx(section[ours]["p999"] / 1e3)
        assert stats["max"] == pytest.approx(section[ours]["max"] / 1e3)
        assert "p25" not in stats  # loadkit has no such percentile: left out, not invented
    assert "normalized_time_per_output_token" not in latency


def test_requests_throughput_and_load(report):
    document = benchmark_reports(report)["fast"]
    section = report["engines"]["fast"]
    aggregate = document["results"]["request_performance"]["aggregate"]
    requests = aggregate["requests"]
    assert requests["total"] == section["requests"] == 49
    assert requests["failures"] == section["failures"]
    assert requests["incomplete"] == section["cancelled"]
    assert requests["input_length"]["mean"] == section["n_in"]["mean"]
    assert requests["output_length"] == {"units": "count", **{k: section["n_out"][k] for k in ("mean", "min", "max", "p50", "p90", "p95", "p99")}, "p99p9": section["n_out"]["p999"]}  # fmt: skip
    throughput = aggregate["throughput"]
    assert throughput["request_rate"] == {"units": "queries/s", "mean": section["requests_per_s"]}
    assert throughput["output_token_rate"]["mean"] == section["output_tokens_per_s"]
    assert throughput["input_token_rate"]["mean"] == pytest.approx(
        section["input_tokens"] / section["window_s"]
    )
    total = throughput["total_token_rate"]["mean"]
    assert total == pytest.approx(throughput["input_token_rate"]["mean"] + section["output_tokens_per_s"])
    load = document["scenario"]["load"]["standardized"]
    assert load["tool"] == "loadkit" and load["source"] == "random"
    assert load["rate_qps"] == 20.0 and "concurrency" not in load  # open loop: a rate, no concurrency
    # The scenario's one part: input uniform 16..64, output fixed 8.
    assert load["input_seq_len"] == {"distribution": "uniform", "value": 40.0, "min": 16, "max": 64}
    assert load["output_seq_len"] == {"distribution": "fixed", "value": 8}
    stack = document["scenario"]["stack"]
    assert [c["metadata"]["label"] for c in stack] == ["fast"]
    assert stack[0]["standardized"]["kind"] == "generic" and stack[0]["standardized"]["tool"] == "openai"
    assert stack[0]["standardized"]["model"] == {"name": "sim-fast"}


def test_closed_loop_gives_the_users_as_concurrency(report):
    report["manifest"]["open_loop"] = False
    report["manifest"]["scenario"]["arrival"] = {"model": "closed", "users": 8}
    load = benchmark_reports(report)["fast"]["scenario"]["load"]["standardized"]
    assert load["concurrency"] == report["manifest"]["users"] == 4  # what the run started (-u)
    assert "rate_qps" not in load


def test_an_engine_with_nothing_measured_still_validates(report):
    section = report["engines"]["fast"]
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "n_in", "n_out"):
        section[name] = {"count": 0, "mean": None, "min": None, "max": None, "p50": None, "p90": None,
                         "p95": None, "p99": None, "p999": None}  # fmt: skip
    section.update(window_s=None, requests_per_s=None, output_tokens_per_s=None)
    document = benchmark_reports(report)["fast"]
    assert schema_errors(document) == []
    aggregate = document["results"]["request_performance"]["aggregate"]
    assert "latency" not in aggregate and "throughput" not in aggregate  # null, never 0
    assert document["scenario"]["load"]["standardized"]["input_seq_len"]["distribution"] == "uniform"


def test_lengths_that_are_not_one_simple_distribution_are_other_with_realised_figures():
    realised = {"count": 10, "mean": 212.5, "min": 9, "max": 900}
    lognormal = {"dist": "lognormal", "median": 200, "sigma": 0.9}
    assert sequence_length(lognormal, realised) == {
        "distribution": "other",
        "value": 212.5,
        "min": 9,
        "max": 900,
    }
    assert sequence_length(128, None) == {"distribution": "fixed", "value": 128}
    assert sequence_length({"dist": "normal", "mean": 50, "std": 5}, None) == {
        "distribution": "gaussian",
        "value": 50,
        "std_dev": 5,
    }
    assert sequence_length(None, None) == {"distribution": "other", "value": 0}


def test_the_validator_is_live(report):
    """A broken mapping fails: each of these breaks one rule of the schema."""
    good = benchmark_reports(report)["fast"]
    breakages = {
        "run: 'uid' is a required": lambda d: d["run"].pop("uid"),
        "results.request_performance.aggregate.latency.time_to_first_token.units": lambda d: d["results"][
            "request_performance"
        ]["aggregate"]["latency"]["time_to_first_token"].update(units="seconds"),
        "results.request_performance.aggregate.requests.total": lambda d: d["results"]["request_performance"][
            "aggregate"
        ]["requests"].update(total=-1),
        "scenario.load.standardized.rate_qps": lambda d: d["scenario"]["load"]["standardized"].update(
            rate_qps=0
        ),
        "scenario.stack.0.standardized": lambda d: d["scenario"]["stack"][0]["standardized"].update(
            kind="inference_engine"
        ),
        "results": lambda d: d["results"].update(latency={}),
    }
    for path, breakage in breakages.items():
        document = copy.deepcopy(good)
        breakage(document)
        errors = schema_errors(document)
        assert errors and any(e.startswith(path) for e in errors), (path, errors)
        with pytest.raises(LlmdReportError, match="not a valid Benchmark Report v0.2"):
            check(document, "target 'fast'")


def test_a_mapping_in_the_wrong_units_is_refused(report, monkeypatch):
    monkeypatch.setattr(llmd, "LATENCIES", (("ttft_ms", "time_to_first_token", "seconds"),))
    with pytest.raises(LlmdReportError, match="time_to_first_token.units"):
        check(benchmark_reports(report)["fast"], "target 'fast'")


def test_an_unknown_engine_or_an_empty_report_is_a_clear_error(report):
    with pytest.raises(LlmdReportError, match="no engine 'nope'"):
        llmd.benchmark_report(report, "nope")
    with pytest.raises(LlmdReportError, match="no engines"):
        benchmark_reports({"engines": {}})


def test_inside_an_llm_d_harness_pod_the_experiment_id_and_description_come_from_its_environment(report):
    env = {"LLMDBENCH_RUN_EXPERIMENT_ID": "loadkit-conc4-1786024743-abcdef",
           "LLMDBENCH_DESCRIPTION_KEYWORDS": "baseline, sim ,"}  # fmt: skip
    run = llmd.run_section(report, "fast", env)
    assert run["eid"] == str(uuid.uuid5(uuid.NAMESPACE_URL, "loadkit-conc4-1786024743-abcdef"))
    assert run["description"].endswith("[loadkit-conc4-1786024743-abcdef]")
    assert run["keywords"] == ["baseline", "sim"]
    run = llmd.run_section(report, "fast", {**env, "LLMDBENCH_DESCRIPTION_TEXT": "mine"})
    assert run["description"] == "mine"
    plain = llmd.run_section(report, "fast", {})
    assert plain["eid"] != run["eid"] and "keywords" not in plain
    assert plain["time"]["start"].endswith("Z") and plain["time"]["duration"].startswith("PT")


def test_the_rules_llm_d_models_add_to_the_schema(report):
    """A unit from the wrong category passes the schema's enum but not llm-d's models."""
    document = benchmark_reports(report)["fast"]
    assert llmd.model_rule_errors(document) == []
    latency = document["results"]["request_performance"]["aggregate"]["latency"]
    latency["time_to_first_token"]["units"] = "tokens/s"
    document["scenario"]["load"]["standardized"]["concurrency"] = 2.5
    assert schema_errors(document) == []  # the schema alone lets both through
    assert llmd.model_rule_errors(document) == [
        "results.request_performance.aggregate.latency.time_to_first_token.units: 'tokens/s' is not one of ['ms', 's']",
        "scenario.load.standardized.concurrency: 2.5 is not an integer",
    ]
    with pytest.raises(LlmdReportError, match="time_to_first_token.units: 'tokens/s'"):
        check(document, "target 'fast'")


def test_the_per_second_rows_become_throughput_series(report):
    section = report["engines"]["fast"]
    series = benchmark_reports(report)["fast"]["results"]["request_performance"]["time_series"]["throughput"]
    requests = series["request_rate"]
    assert requests["units"] == "queries/s" and len(requests["series"]) == len(section["timeseries"]["unix"])
    assert [p["value"] for p in requests["series"]] == section["timeseries"]["requests"]
    assert sum(p["value"] for p in series["output_token_rate"]["series"]) == section["output_tokens"]
    first = section["timeseries"]["unix"][0]
    assert requests["series"][0]["ts"] == llmd._iso(float(first)) and requests["series"][0]["ts"].endswith(
        "Z"
    )
    del section["timeseries"]
    assert "time_series" not in benchmark_reports(report)["fast"]["results"]["request_performance"]
