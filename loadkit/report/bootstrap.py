"""Bootstrap confidence intervals for the change of a percentile between two runs.

Seeded and bounded: the number of resamples shrinks for large logs so one comparison costs
at most about ``WORK_BUDGET`` sampled values per run (a few seconds on one core).
"""

from __future__ import annotations

import numpy as np

WORK_BUDGET = 10_000_000
MIN_RESAMPLES = 200
BATCH_VALUES = 2_000_000


def resamples_for(n: int, wanted: int) -> int:
    """``wanted`` resamples, fewer (never under MIN_RESAMPLES) when n × resamples passes the budget."""
    return max(MIN_RESAMPLES, min(wanted, WORK_BUDGET // max(n, 1)))


def boot_quantiles(
    values: np.ndarray, qs: list[float], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """(resamples, len(qs)) quantiles of resamples-with-replacement of ``values``."""
    n = values.size
    out = np.empty((resamples, len(qs)))
    batch = max(1, BATCH_VALUES // n)
    for start in range(0, resamples, batch):
        count = min(batch, resamples - start)
        idx = rng.integers(0, n, size=(count, n))
        out[start : start + count] = np.quantile(values[idx], qs, axis=1).T
    return out


def diff_ci(a: np.ndarray, b: np.ndarray, qs: list[float], *, resamples: int = 1000, seed: int = 0,
            level: float = 0.95) -> list[tuple[float, float] | None]:  # fmt: skip
    """Per quantile q: the ``level`` percentile-bootstrap interval of quantile_q(b) − quantile_q(a).

    None for a quantile when either side has fewer than 2 values (no interval to speak of).
    """
    if a.size < 2 or b.size < 2:
        return [None for _ in qs]
    rng = np.random.default_rng(seed)
    r = resamples_for(max(a.size, b.size), resamples)
    diffs = boot_quantiles(b, qs, r, rng) - boot_quantiles(a, qs, r, rng)
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.percentile(diffs, [tail, 100 - tail], axis=0)
    return [(float(x), float(y)) for x, y in zip(lo, hi, strict=True)]
