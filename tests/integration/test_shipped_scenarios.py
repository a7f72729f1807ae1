"""Every shipped scenario (scenarios/, given by name) runs valid against the simulator
`loadkit run` starts for it — the default profile, or the one its [sim] table names — with no
other option: requests go out, none fails, and every request is accounted for."""

from __future__ import annotations

import pytest

from loadkit.workload import load_scenario
from loadkit.workload.shipped import shipped_scenarios
from tests.helpers.runs import check_conservation, load_report, raw_records
from tests.helpers.simruns import loadkit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCENARIOS = list(shipped_scenarios().values())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenario_runs_valid_against_its_simulator(tmp_path, scenario):
    loaded = load_scenario(scenario)
    # A scenario naming its own target (real_server) gets a simulator under that name.
    sims = [arg for t in loaded.targets for arg in ("--sim", t["name"])]
    report_dir = tmp_path / "r"
    proc = loadkit("run", *sims, "--scenario", scenario.stem, "-u", "4", "-r", "4", "-t", "3s",
                   "--stop-timeout", "15", "--report-dir", str(report_dir), "--raw-log", timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    profile = loaded.sim_profile or "default"
    assert f"(profile {profile}) at http://127.0.0.1:" in proc.stdout, proc.stdout[-2000:]
    report = load_report(report_dir)
    assert report["valid"], report["invalid_reasons"]
    check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert ok, {r["outcome"] for r in rows}
    failed = [r for r in rows if r["outcome"] not in ("ok", "cancelled")]
    assert not failed, failed[:3]
