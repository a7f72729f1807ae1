"""A scenario of embeddings parts (docs/scenarios.md, "Request kinds") run by `loadkit run`
against a real llama.cpp server with the suite's tiny model: the kinds section's row is the
raw log's (conservation and the oracle), its input tokens the server's own usage, and the
engine row takes no streamed figure from an embedding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loadkit.testing import llamacpp
from loadkit.testing.llamacpp import LlamaServer
from tests.helpers.runs import check_conservation, raw_records
from tests.helpers.simruns import loadkit

pytestmark = pytest.mark.integration

SCENARIO = """schema = "loadkit.scenario/1"
name = "llama-embeddings"
seed = 11
max_requests = 30
[slos]
latency_ms = 10000
[[parts]]
name = "embed"
kind = "embeddings"
inputs = { dist = "uniform", low = 1, high = 4 }
input_tokens = { dist = "uniform", low = 4, high = 24 }
"""


@pytest.fixture(scope="module")
def embedder() -> Iterator[LlamaServer]:
    with llamacpp.pytest_llama_server(
        slots=2, ctx=512, extra_args=["--embeddings", "--pooling", "mean"]
    ) as srv:
        yield srv


def test_an_embeddings_scenario_against_llamacpp(embedder, tmp_path):
    scenario = tmp_path / "emb.toml"
    scenario.write_text(SCENARIO)
    report_dir = tmp_path / "r"
    proc = loadkit("run", "--scenario", str(scenario), "--host", embedder.url, "--engine", "llamacpp",
                   "-u", "2", "-r", "2", "-t", "60s", "--report-dir", str(report_dir), "--raw-log", timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = check_conservation(report_dir)  # and the oracle: the kinds row recomputed
    rows = raw_records(report_dir)
    assert len(rows) == 30 and {r["outcome"] for r in rows} == {"ok"}, {r["outcome"] for r in rows}
    (row,) = report["kinds"]["rows"]
    assert (row["target"], row["kind"], row["requests"], row["ok"]) == ("llamacpp", "embeddings", 30, 30)
    assert row["items"] == sum(r["n_items"] for r in rows) and row["batch_size"]["max"] <= 4
    assert row["input_tokens"] == sum(r["n_in"] for r in rows) > 0  # the server's usage
    assert row["latency_ms"]["count"] == 30 and row["latency_per_item_ms"]["count"] == sum(
        1 for r in rows if r["n_items"] >= 2
    )
    engine = report["engines"]["llamacpp"]
    assert engine["ttft_ms"]["count"] == engine["e2e_ms"]["count"] == 0
    assert engine["slo"]["attainment"]["latency_ms"]["met"] == 30
