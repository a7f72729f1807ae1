"""`loadkit compare` of a REAL short loadkit run against the simulator with real peers' files
(GuideLLM, AIPerf, vLLM, SGLang, genai-bench) side by side, and `--fail-if` gates that trip on
the imported figures."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.helpers.runs import check_conservation
from tests.helpers.simruns import loadkit, sim_run
from tests.report.test_peers import AIPERF, GENAI_RUN, GUIDELLM, SGLANG, VLLM

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SAME_WORKLOAD = Path(__file__).parents[2] / "benchmarks" / "peers" / "same_workload.toml"


@pytest.fixture(scope="module")
def loadkit_run(tmp_path_factory):
    # the peers' fixture workload (2 users, 64-token prompts, 32-token answers, sim profile fast)
    run = sim_run(
        tmp_path_factory.mktemp("peers") / "run", "--scenario", str(SAME_WORKLOAD), seconds=5, users=2
    )
    check_conservation(run)  # every scheduled request of the loadkit side accounted for once
    return str(run)


def test_compare_shows_a_peer_file_beside_a_loadkit_run(loadkit_run):
    proc = loadkit("compare", loadkit_run, str(GUIDELLM))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"[sim]  vs  {GUIDELLM} [guidellm]" in out
    assert "note (B): imported from guidellm 0.8.1" in out
    assert "note (B): tpot_ms: from GuideLLM's inter_token_latency_ms" in out
    ttft = next(line for line in out.splitlines() if line.strip().startswith("ttft_ms.p99"))
    assert "not measured" not in ttft  # both sides have the figure
    as_json = orjson.loads(loadkit("compare", loadkit_run, str(GUIDELLM), str(AIPERF), "--json").stdout)
    b = {c["run"]: c for c in as_json["comparisons"]}
    peer = orjson.loads(GUIDELLM.read_bytes())["benchmarks"][0]["metrics"]
    row = next(r for r in b[str(GUIDELLM)]["metrics"] if r["metric"] == "ttft_ms.p99")
    assert row["b"] == peer["time_to_first_token_ms"]["successful"]["percentiles"]["p99"]
    assert b[str(AIPERF)]["engine_b"] == "aiperf"


def test_fail_if_trips_on_an_imported_figure(loadkit_run):
    peer = orjson.loads(GUIDELLM.read_bytes())["benchmarks"][0]["metrics"]
    base = orjson.loads((Path(loadkit_run) / "report.json").read_bytes())
    ours = base["engines"]["sim"]["ttft_ms"]["p50"]
    theirs = peer["time_to_first_token_ms"]["successful"]["percentiles"]["p50"]
    # a threshold just below / above the real change between the two files' figures
    change = (theirs - ours) / ours * 100
    fired = loadkit("compare", loadkit_run, str(GUIDELLM), "--fail-if", f"ttft_ms.p50>{change - 1:+.1f}%")
    assert fired.returncode == 1, fired.stdout + fired.stderr
    assert f"{GUIDELLM} engine sim/guidellm" in fired.stdout
    held = loadkit("compare", loadkit_run, str(GUIDELLM), "--fail-if", f"ttft_ms.p50>{change + 1:+.1f}%")
    assert held.returncode == 0, held.stdout + held.stderr
    # GuideLLM has no loadkit SLOs: a gate on goodput fires as not measured rather than passing
    missing = loadkit("compare", loadkit_run, str(GUIDELLM), "--fail-if", "goodput.rps<-10%")
    assert missing.returncode == 1 and "[not measured]" in missing.stdout


# peer file, "tool version" as the notes name it, the file's ttft p50 in ms (read here, not by the importer)
MORE_PEERS = {
    "genai-bench": (
        GENAI_RUN,
        "genai-bench 0.0.5",
        lambda raw: raw["aggregated_metrics"]["stats"]["ttft"]["p50"] * 1000,
    ),
    "vllm": (VLLM, "vllm (version not recorded)", lambda raw: raw["median_ttft_ms"]),
    "sglang": (SGLANG, "sglang (version not recorded)", lambda raw: raw["median_ttft_ms"]),
}


@pytest.mark.parametrize("tool", sorted(MORE_PEERS))
def test_more_peers_beside_a_loadkit_run(loadkit_run, tool, tmp_path):
    file, version, ttft_p50 = MORE_PEERS[tool]
    proc = loadkit("compare", loadkit_run, str(file))
    assert proc.returncode == 0, proc.stderr
    assert f"[sim]  vs  {file} [{tool}]" in proc.stdout
    assert f"note (B): imported from {version}" in proc.stdout
    assert "note (B): percentiles:" in proc.stdout and "linear interpolation" in proc.stdout
    theirs = ttft_p50(json.loads(file.read_text(), parse_constant=float))  # SGLang writes Infinity
    as_json = orjson.loads(loadkit("compare", loadkit_run, str(file), "--json").stdout)
    (pair,) = as_json["comparisons"]
    row = next(r for r in pair["metrics"] if r["metric"] == "ttft_ms.p50")
    assert row["b"] == pytest.approx(theirs, rel=1e-12)
    # report.html of the imported file, as `loadkit import` writes it: the peer's figure on the page
    out = tmp_path / tool
    imported = loadkit("import", str(file), "-o", str(out))
    assert imported.returncode == 0, imported.stderr
    page = (out / "report.html").read_text()
    assert f"<td>{tool}</td>" in page and f"<td>{theirs:.1f}</td>" in page  # the summary table's TTFT p50
    # a gate just under / over the real change between the two runs' ttft p50
    ours = orjson.loads((Path(loadkit_run) / "report.json").read_bytes())["engines"]["sim"]
    change = (theirs - ours["ttft_ms"]["p50"]) / ours["ttft_ms"]["p50"] * 100
    fired = loadkit("compare", loadkit_run, str(file), "--fail-if", f"ttft_ms.p50>{change - 1:+.1f}%")
    assert fired.returncode == 1 and f"{file} engine sim/{tool}" in fired.stdout, fired.stdout + fired.stderr
    held = loadkit("compare", loadkit_run, str(file), "--fail-if", f"ttft_ms.p50>{change + 1:+.1f}%")
    assert held.returncode == 0, held.stdout + held.stderr
