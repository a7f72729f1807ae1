import numpy as np
import pytest
from scipy import stats

from loadkit.workload.arrival import Stage, arrival_offsets, realised_stats, stages_from_spec, worker_share


def offsets(model, rate, cv=1.0, duration=2000.0, seed=1):
    return [t for t, _ in arrival_offsets(model, [Stage(duration, rate, cv)], seed)]


def test_poisson_rate_and_exponential_gaps():
    ts = offsets("poisson", 5.0)
    s = realised_stats(ts)
    assert s["rate"] == pytest.approx(5.0, rel=0.05)
    assert s["cv"] == pytest.approx(1.0, abs=0.05)
    gaps = np.diff(ts)
    # KS test against the asked exponential distribution: must not reject at 1%.
    assert stats.kstest(gaps, "expon", args=(0, 1 / 5.0)).pvalue > 0.01


@pytest.mark.parametrize("cv", [0.5, 2.0, 3.0])
def test_gamma_cv(cv):
    ts = offsets("gamma", 10.0, cv=cv)
    s = realised_stats(ts)
    assert s["rate"] == pytest.approx(10.0, rel=0.08)
    assert s["cv"] == pytest.approx(cv, rel=0.1)


def test_constant_is_exact():
    ts = offsets("constant", 4.0, duration=10.0)
    assert ts == pytest.approx([0.25 * i for i in range(1, 40)])


def test_worker_shares_are_disjoint_and_union_is_whole():
    whole = list(arrival_offsets("poisson", [Stage(100.0, 20.0)], 7))
    shares = [list(worker_share(arrival_offsets("poisson", [Stage(100.0, 20.0)], 7), i, 3)) for i in range(3)]
    assert sorted(x for share in shares for x in share) == whole
    assert sum(len(s) for s in shares) == len(whole)
    assert abs(len(shares[0]) - len(shares[2])) <= 1


def test_stages_change_rate_and_are_named():
    stages = stages_from_spec(
        {"model": "poisson", "stages": [{"duration_s": 100, "rate": 2}, {"duration_s": 100, "rate": 20}]}
    )
    pts = list(arrival_offsets("poisson", stages, 3))
    first = [t for t, name in pts if name == "stage1"]
    second = [t for t, name in pts if name == "stage2"]
    assert all(t < 100 for t in first) and all(100 <= t < 200 for t in second)
    assert len(first) == pytest.approx(200, rel=0.2)
    assert len(second) == pytest.approx(2000, rel=0.1)


def test_ramp_rises():
    pts = [t for t, _ in arrival_offsets("poisson", [Stage(100.0, 1.0, ramp_to=21.0)], 5)]
    early = sum(1 for t in pts if t < 50)
    late = sum(1 for t in pts if t >= 50)
    # Integral of the ramp: 50*(1+11)/2 = 300 in the first half, 50*(11+21)/2 = 800 in the second.
    assert early == pytest.approx(300, rel=0.2) and late == pytest.approx(800, rel=0.15)


def test_same_seed_same_schedule_and_different_seed_differs():
    assert offsets("poisson", 5, duration=50, seed=9) == offsets("poisson", 5, duration=50, seed=9)
    assert offsets("poisson", 5, duration=50, seed=9) != offsets("poisson", 5, duration=50, seed=10)
