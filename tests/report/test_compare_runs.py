"""`loadkit compare` on two REAL simulator runs with different profiles finds the difference."""

from __future__ import annotations

import orjson
import pytest

from tests.helpers.simruns import loadkit, sim_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def fast_and_big(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    fast = sim_run(root / "fast", "--sim", "a=fast", seconds=8, users=6)
    big = sim_run(root / "big", "--sim", "a=big", seconds=8, users=6)
    return str(fast), str(big)


def test_compare_finds_the_slower_profile(fast_and_big):
    fast, big = fast_and_big
    proc = loadkit("compare", fast, big, "--json")
    assert proc.returncode == 0, proc.stderr
    result = orjson.loads(proc.stdout)
    (pair,) = result["comparisons"]
    assert (pair["engine_a"], pair["engine_b"], pair["raw_logs"]) == ("a", "a", True)
    tpot = next(r for r in pair["metrics"] if r["metric"] == "tpot_ms.p50")
    assert tpot["delta_pct"] > 100, tpot
    assert tpot["ci95"][0] > 0 and tpot["significant"] is True


def test_fail_if_gates_on_the_regression(fast_and_big):
    fast, big = fast_and_big
    fired = loadkit("compare", fast, big, "--fail-if", "tpot_ms.p50>+10%")
    assert fired.returncode == 1, fired.stdout + fired.stderr
    assert "FAIL  --fail-if tpot_ms.p50>+10%" in fired.stdout
    held = loadkit("compare", fast, big, "--fail-if", "tpot_ms.p50>+10000%")
    assert held.returncode == 0, held.stdout + held.stderr
    assert "pass  --fail-if tpot_ms.p50>+10000%" in held.stdout
    bad = loadkit("compare", fast, big, "--fail-if", "tpot_ms.p50 is worse")
    assert bad.returncode == 2 and "bad --fail-if rule" in bad.stderr
