"""Realised lengths from the request stream match the asked distributions (two-sample KS / chi-square).

Each test draws N requests through a scenario (parse -> source -> GenerationRequest) and
compares their input lengths with N direct numpy draws of the asked family, clipped and
rounded the same way, using independent code. A shifted control must be rejected, so each
test can fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from loadkit.workload import load_scenario
from tests.workload.conftest import TRACES

N = 1500
ALPHA = 1e-3


def realised_inputs(write_scenario, dist: str, n: int = N) -> np.ndarray:
    path = write_scenario(f"""
        [[parts]]
        name = "p"
        input = {dist}
        output = 1
    """)
    source = load_scenario(path).request_source()
    lengths = []
    for _ in range(n):
        req = source.next_item()
        assert len(req.messages[0]["content"].split()) == req.n_in_target  # prompt has the realised length
        lengths.append(req.n_in_target)
    return np.asarray(lengths)


def clip_round(x: np.ndarray, lo: float = 1, hi: float = math.inf) -> np.ndarray:
    return np.clip(np.round(np.clip(x, lo, hi)), 1, None)


def assert_same(realised: np.ndarray, direct: np.ndarray, control: np.ndarray) -> None:
    assert stats.ks_2samp(realised, direct).pvalue > ALPHA
    assert stats.ks_2samp(realised, control).pvalue < ALPHA  # the test has teeth


def test_fixed_is_exact(write_scenario):
    assert set(realised_inputs(write_scenario, '{ dist = "fixed", value = 77 }', 50)) == {77}


def test_bare_number_is_fixed(write_scenario):
    assert set(realised_inputs(write_scenario, "33", 20)) == {33}


def test_uniform(write_scenario):
    rng = np.random.default_rng(1)
    got = realised_inputs(write_scenario, '{ dist = "uniform", low = 10, high = 500 }')
    assert_same(got, clip_round(rng.uniform(10, 500, N)), clip_round(rng.uniform(110, 600, N)))


def test_normal_with_clipping(write_scenario):
    rng = np.random.default_rng(2)
    got = realised_inputs(write_scenario, '{ dist = "normal", mean = 200, std = 80, min = 100, max = 300 }')
    assert got.min() >= 100 and got.max() <= 300
    assert_same(
        got, clip_round(rng.normal(200, 80, N), 100, 300), clip_round(rng.normal(230, 80, N), 100, 300)
    )


def test_lognormal_mean_std(write_scenario):
    rng = np.random.default_rng(3)
    sigma2 = math.log1p((600 / 800) ** 2)
    mu = math.log(800) - sigma2 / 2
    got = realised_inputs(write_scenario, '{ dist = "lognormal", mean = 800, std = 600 }')
    assert_same(
        got,
        clip_round(rng.lognormal(mu, math.sqrt(sigma2), N)),
        clip_round(rng.lognormal(mu + 0.2, math.sqrt(sigma2), N)),
    )


def test_lognormal_median_sigma(write_scenario):
    rng = np.random.default_rng(4)
    got = realised_inputs(write_scenario, '{ dist = "lognormal", median = 300, sigma = 0.5, max = 2000 }')
    assert_same(
        got,
        clip_round(300 * np.exp(rng.normal(0, 0.5, N)), 1, 2000),
        clip_round(360 * np.exp(rng.normal(0, 0.5, N)), 1, 2000),
    )


def test_gamma_mean_cv(write_scenario):
    rng = np.random.default_rng(5)
    got = realised_inputs(write_scenario, '{ dist = "gamma", mean = 400, cv = 0.5 }')
    # scipy's gamma, not numpy's: an independent implementation of the family.
    direct = stats.gamma(a=4, scale=100).rvs(N, random_state=rng)
    assert_same(got, clip_round(direct), clip_round(stats.gamma(a=4, scale=115).rvs(N, random_state=rng)))


def test_pareto_classical(write_scenario):
    rng = np.random.default_rng(6)
    got = realised_inputs(write_scenario, '{ dist = "pareto", alpha = 2.0, xm = 100, max = 5000 }')
    assert got.min() >= 100
    direct = stats.pareto(b=2.0, scale=100).rvs(N, random_state=rng)
    control = stats.pareto(b=1.5, scale=100).rvs(N, random_state=rng)
    assert_same(got, clip_round(direct, 1, 5000), clip_round(control, 1, 5000))


def test_zipf_chi_square(write_scenario):
    got = realised_inputs(write_scenario, '{ dist = "zipf", a = 2.0, max = 6 }', 3000)
    ks = np.arange(1, 6)
    p = np.append(stats.zipf(2.0).pmf(ks), stats.zipf(2.0).sf(5))  # values > 6 are clipped to 6
    observed = np.array([np.sum(got == k) for k in range(1, 7)])
    assert stats.chisquare(observed, p * len(got)).pvalue > ALPHA
    p_wrong = np.append(stats.zipf(2.5).pmf(ks), stats.zipf(2.5).sf(5))
    assert stats.chisquare(observed, p_wrong * len(got)).pvalue < ALPHA


def test_mixture_weights_and_components(write_scenario):
    rng = np.random.default_rng(7)
    got = realised_inputs(
        write_scenario,
        """{ dist = "mixture", components = [
        { weight = 3, dist = "normal", mean = 100, std = 10 },
        { weight = 1, dist = "normal", mean = 1000, std = 50 } ] }""",
    )
    pick = rng.random(N) < 0.75
    direct = np.where(pick, rng.normal(100, 10, N), rng.normal(1000, 50, N))
    control = np.where(rng.random(N) < 0.6, rng.normal(100, 10, N), rng.normal(1000, 50, N))
    assert_same(got, clip_round(direct), clip_round(control))


def test_empirical_from_csv_column(write_scenario):
    path = TRACES / "sharegpt-lengths" / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
    column = np.loadtxt(path, delimiter=",", skiprows=1, usecols=0)
    got = realised_inputs(
        write_scenario, f'{{ dist = "empirical", path = "{path}", column = "num_prefill_tokens" }}'
    )
    rng = np.random.default_rng(8)
    assert_same(got, rng.choice(column, N), rng.choice(column, N) * 1.25)


def test_joint_pairs_keep_correlation(write_scenario):
    path = TRACES / "sharegpt-lengths" / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
    table = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(0, 1))
    scenario = write_scenario(f"""
        [[parts]]
        name = "j"
        joint = {{ path = "{path}" }}
    """)
    source = load_scenario(scenario).request_source()
    pairs = np.array([(r.n_in_target, r.max_tokens) for r in (source.next_item() for _ in range(3000))])
    # Each realised pair is a row of the trace, not an independent recombination.
    rows = {(int(a), int(b)) for a, b in table}
    assert all((int(a), int(b)) in rows for a, b in pairs)
    trace_rho = stats.spearmanr(table[:, 0], table[:, 1]).statistic
    got_rho = stats.spearmanr(pairs[:, 0], pairs[:, 1]).statistic
    assert abs(got_rho - trace_rho) < 0.06
    assert stats.ks_2samp(pairs[:, 0], table[:, 0]).pvalue > ALPHA


def test_time_distribution_is_float_not_rounded():
    from loadkit.workload.distributions import parse_distribution
    from loadkit.workload.errors import Ctx

    d = parse_distribution(Ctx("x"), {"dist": "gamma", "mean": 0.5, "cv": 1.0}, lambda c, p: p, integer=False)
    draws = [d.sample(np.random.default_rng(i)) for i in range(200)]
    assert any(0 < x < 0.5 and x != round(x) for x in draws)


@pytest.mark.parametrize("spec", ['{ dist = "uniform", low = 5, high = 9 }', '{ dist = "fixed", value = 3 }'])
def test_output_lengths_follow_spec_too(write_scenario, spec):
    path = write_scenario(f"""
        [[parts]]
        name = "p"
        input = 4
        output = {spec}
    """)
    source = load_scenario(path).request_source()
    outs = {source.next_item().max_tokens for _ in range(300)}
    assert outs == ({5, 6, 7, 8, 9} if "uniform" in spec else {3})
