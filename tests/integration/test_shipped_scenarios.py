"""Every shipped scenario (loadkit/scenarios/, given by name) runs against the simulator:
requests go out, most come back ok, and every request is accounted for."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from loadkit.workload.shipped import shipped_scenarios
from tests.integration.runs import check_conservation, raw_records, run_locust

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCENARIOS = list(shipped_scenarios().values())


@pytest.fixture(scope="module")
def sim():
    # Long-context traces (Mooncake reaches ~128k tokens) need a long max_model_len.
    with sim_process("--profile", "fast", "--max-model-len", "262144") as handle:
        yield handle


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenario_runs(tmp_path, sim, scenario):
    report_dir = tmp_path / "r"
    proc = run_locust(
        "--headless", "-u", "8", "-r", "8", "-t", "5s", "--stop-timeout", "2", "--host", sim.url,
        "--engine", "vllm", "--scenario", scenario.stem, "--report-dir", str(report_dir), "--raw-log",
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert ok, {r["outcome"] for r in rows}
    failed = [r for r in rows if r["outcome"] not in ("ok", "cancelled")]
    assert not failed, failed[:3]
