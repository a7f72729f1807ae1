"""`loadkit compare` of a REAL short loadkit run against the simulator with a real GuideLLM
file side by side, and a `--fail-if` gate that trips on the imported figures."""

from __future__ import annotations

import orjson
import pytest

from tests.helpers.simruns import loadkit, sim_run
from tests.report.test_peers import AIPERF, GUIDELLM

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def loadkit_run(tmp_path_factory):
    return str(sim_run(tmp_path_factory.mktemp("peers") / "run", "--sim", "a=fast", seconds=5, users=2))


def test_compare_shows_a_peer_file_beside_a_loadkit_run(loadkit_run):
    proc = loadkit("compare", loadkit_run, str(GUIDELLM))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"[a]  vs  {GUIDELLM} [guidellm]" in out
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
    base = orjson.loads((__import__("pathlib").Path(loadkit_run) / "report.json").read_bytes())
    ours = base["engines"]["a"]["ttft_ms"]["p50"]
    theirs = peer["time_to_first_token_ms"]["successful"]["percentiles"]["p50"]
    # a threshold just below / above the real change between the two files' figures
    change = (theirs - ours) / ours * 100
    fired = loadkit("compare", loadkit_run, str(GUIDELLM), "--fail-if", f"ttft_ms.p50>{change - 1:+.1f}%")
    assert fired.returncode == 1, fired.stdout + fired.stderr
    assert f"{GUIDELLM} engine a/guidellm" in fired.stdout
    held = loadkit("compare", loadkit_run, str(GUIDELLM), "--fail-if", f"ttft_ms.p50>{change + 1:+.1f}%")
    assert held.returncode == 0, held.stdout + held.stderr
    # GuideLLM has no loadkit SLOs: a gate on goodput fires as not measured rather than passing
    missing = loadkit("compare", loadkit_run, str(GUIDELLM), "--fail-if", "goodput.rps<-10%")
    assert missing.returncode == 1 and "[not measured]" in missing.stdout
