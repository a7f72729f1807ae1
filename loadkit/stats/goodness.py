"""Goodness of fit of realised inter-arrival gaps, numpy only (scipy is not a runtime dependency).

Kolmogorov–Smirnov: one sample against the asked exponential or gamma distribution, two
samples against the gaps a trace asked for. p-values use the asymptotic Kolmogorov
distribution with Stephens' small-sample correction (accurate to a few 1e-3 for n ≥ 20, which
the tests check against scipy).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

MIN_GAPS = 20  # fewer gaps than this: no test (the asymptotic p-value is not to be trusted)


def kolmogorov_p(d: float, n_eff: float) -> float:
    """P(D ≥ d) for the KS statistic d at effective sample size n_eff."""
    en = math.sqrt(n_eff)
    lam = (en + 0.12 + 0.11 / en) * d
    if lam < 0.2:
        return 1.0
    j = np.arange(1, 101)
    terms = 2.0 * (-1.0) ** (j - 1) * np.exp(-2.0 * j * j * lam * lam)
    return float(min(1.0, max(0.0, terms.sum())))


def ks_one_sample(samples: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
    """(D, p) of samples against a continuous CDF."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    f = cdf(x)
    d_plus = np.max(np.arange(1, n + 1) / n - f)
    d_minus = np.max(f - np.arange(0, n) / n)
    d = float(max(d_plus, d_minus))
    return d, kolmogorov_p(d, n)


def ks_two_sample(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(D, p) of two samples: the largest gap between their empirical CDFs."""
    a, b = np.sort(np.asarray(a, dtype=float)), np.sort(np.asarray(b, dtype=float))
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / len(a)
    fb = np.searchsorted(b, grid, side="right") / len(b)
    d = float(np.max(np.abs(fa - fb)))
    return d, kolmogorov_p(d, len(a) * len(b) / (len(a) + len(b)))


def exponential_cdf(rate: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: 1.0 - np.exp(-rate * np.maximum(x, 0.0))


def gamma_cdf(rate: float, cv: float) -> Callable[[np.ndarray], np.ndarray]:
    """Gaps of mean 1/rate and coefficient of variation cv: shape 1/cv², scale 1/(rate·shape)."""
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate * shape)
    return lambda x: regularized_gamma_p(shape, np.maximum(x, 0.0) / scale)


def regularized_gamma_p(a: float, x: np.ndarray) -> np.ndarray:
    """P(a, x), the regularised lower incomplete gamma function, elementwise.

    Series where x < a + 1, Lentz's continued fraction for Q = 1 − P elsewhere: both converge
    fast in their own region (the textbook split)."""
    x = np.asarray(x, dtype=float)
    out = np.zeros_like(x)
    low = (x > 0) & (x < a + 1)
    high = x >= a + 1
    out[low] = _series(a, x[low])
    out[high] = 1.0 - _continued_fraction(a, x[high])
    return np.clip(out, 0.0, 1.0)


def _series(a: float, x: np.ndarray) -> np.ndarray:
    term = np.full_like(x, 1.0 / a)
    total = term.copy()
    for k in range(1, 500):
        term = term * x / (a + k)
        total += term
        if np.all(np.abs(term) < np.abs(total) * 1e-15):
            break
    return total * np.exp(-x + a * np.log(x) - math.lgamma(a))


def _continued_fraction(a: float, x: np.ndarray) -> np.ndarray:
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / tiny)
    d = 1.0 / b
    h = d.copy()
    for i in range(1, 500):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) < 1e-15):
            break
    return np.exp(-x + a * np.log(x) - math.lgamma(a)) * h
