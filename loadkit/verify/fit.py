"""The delivered section's ``fit``, recomputed: the test behind "as asked" / "NOT as asked".

docs/reports.md ("Delivered load") defines it. The realised inter-arrival gaps (of the row's
arrivals, sorted) and the asked ones are compared at the client's scheduling resolution: both
floored to ``resolution_ms``, which is 1 ms or, when larger, the 99th percentile of the row's
schedule lags (send − scheduled time of each scheduled send, negative ones as 0; the percentile
interpolated linearly between the two nearest ranks) rounded up to a whole ms. Then:

- Poisson: one-sample Kolmogorov–Smirnov against the exponential law of the asked rate; gamma:
  against the gamma law of the asked rate and CV (shape 1/CV², mean 1/rate). The law is floored
  like the gaps, so at each floored value k·step the sample's CDF is compared with the law's
  CDF at (k+1)·step and the sample's left limit with the law's CDF at k·step;
- a trace: two-sample KS against the gaps of the part of the trace asked (asked.py);
- the p-value: the asymptotic Kolmogorov distribution at λ = (√n + 0.12 + 0.11/√n)·D (Stephens'
  small-sample correction; n the gaps, or nm/(n+m) for two samples), 1 when λ < 0.2;
- ``consistent`` (as asked) unless p < alpha (0.01); no test below 20 gaps, nor for a constant,
  closed-loop, ramped or not-asked row.

Tolerance: a gap within what the times' uncertainty (float rounding; 1 µs per time shipped by
a worker; the processes' offsets, except for a gap both of whose ends, and every send near
them, are of one process) moves it of a positive step's edge may floor either way; each such
gap moves D by at most 1/n. D is compared within that, the p-value within the p-values of D ±
that, and the verdict exactly unless that p-value range straddles alpha.
"""

from __future__ import annotations

import math
from typing import Any

from loadkit.verify.compare import Verdict

ALPHA = 0.01
MIN_GAPS = 20
MIN_RESOLUTION_MS = 1.0
NS_PER_S = 1_000_000_000
FLOAT_EPS_S = 1e-9  # float rounding of offsets in seconds: far below any step's edge


def linear_quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the order statistics at (n − 1)·q."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def resolution_ms(lags_ns: list[int]) -> float:
    if not lags_ns:
        return MIN_RESOLUTION_MS
    p99_ms = linear_quantile(sorted(max(x, 0) for x in lags_ns), 0.99) / 1e6
    return max(MIN_RESOLUTION_MS, float(math.ceil(p99_ms)))


def kolmogorov_p(d: float, n_eff: float) -> float:
    root = math.sqrt(n_eff)
    lam = (root + 0.12 + 0.11 / root) * d
    if lam < 0.2:
        return 1.0
    total = 0.0
    for j in range(1, 101):
        total += 2.0 * (-1.0) ** (j - 1) * math.exp(-2.0 * j * j * lam * lam)
    return min(1.0, max(0.0, total))


def lower_gamma_regularised(a: float, x: float) -> float:
    """P(a, x): its power series below x = a + 1, one minus the continued fraction of Q above."""
    if x <= 0:
        return 0.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = 1
        while abs(term) > abs(total) * 1e-16 and n < 1000:
            term *= x / (a + n)
            total += term
            n += 1
        return min(1.0, total * math.exp(log_front))
    # Q(a, x) by the modified Lentz method on its continued fraction.
    small = 1e-300
    b = x + 1.0 - a
    c = 1.0 / small
    d = 1.0 / b
    frac = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = small if abs(d) < small else d
        c = b + an / c
        c = small if abs(c) < small else c
        d = 1.0 / d
        step = d * c
        frac *= step
        if abs(step - 1.0) < 1e-16:
            break
    return max(0.0, 1.0 - math.exp(log_front) * frac)


def gap_law(model: str, rate: float, cv: float | None) -> Any:
    if model == "poisson":
        return lambda x: 1.0 - math.exp(-rate * x) if x > 0 else 0.0
    shape = 1.0 / (float(cv) ** 2)  # type: ignore[arg-type]
    scale = 1.0 / (rate * shape)
    return lambda x: lower_gamma_regularised(shape, x / scale)


def floored_steps(gaps_s: list[float], step_s: float) -> list[int]:
    return [math.floor(g / step_s) for g in gaps_s]


def near_edges(gaps_s: list[float], step_s: float, eps_s: float | list[float]) -> int:
    """Gaps within ``eps_s`` (one for all, or each gap's own) of a positive multiple of
    ``step_s``: they may floor either way. A gap is never negative, so one near 0 floors to 0."""
    n = 0
    for i, g in enumerate(gaps_s):
        k = round(g / step_s)
        eps = eps_s[i] if isinstance(eps_s, list) else eps_s
        n += k >= 1 and abs(g - k * step_s) <= eps
    return n


def gap_uncertainty(arrivals_ns: list[int], processes: list[Any], eps_s: float, own_s: float) -> list[float]:
    """How far each gap of the sorted arrivals may lie from the section's. Each time is within
    ``eps_s`` of its place (``own_s`` of it among its own process's times), so the i-th gap of
    the sorted times moves by at most 2·eps_s; when both its ends are of one process and no
    other process's arrival lies within 2·eps_s of either, both keep their ranks and the gap
    moves only by 2·own_s."""
    n = len(arrivals_ns)
    reach = 2 * eps_s * NS_PER_S
    out = []
    for i in range(n - 1):
        clean = processes[i] == processes[i + 1]
        for j in (i - 1, i + 2):
            if clean and 0 <= j < n and processes[j] != processes[i]:
                ref = arrivals_ns[i] if j < i else arrivals_ns[i + 1]
                clean = abs(arrivals_ns[j] - ref) > reach
        # Farther arrivals of other processes: only those within reach could swap in.
        k = i - 2
        while clean and k >= 0 and arrivals_ns[i] - arrivals_ns[k] <= reach:
            clean = processes[k] == processes[i]
            k -= 1
        k = i + 3
        while clean and k < n and arrivals_ns[k] - arrivals_ns[i + 1] <= reach:
            clean = processes[k] == processes[i]
            k += 1
        out.append(2 * (own_s if clean else eps_s) + FLOAT_EPS_S)
    return out


def ks_one(steps: list[int], step_s: float, law: Any) -> float:
    counts: dict[int, int] = {}
    for k in steps:
        counts[k] = counts.get(k, 0) + 1
    n = len(steps)
    below = 0
    d = 0.0
    for k in sorted(counts):
        upto = below + counts[k]
        d = max(d, abs(upto / n - law((k + 1) * step_s)), abs(below / n - law(k * step_s)))
        below = upto
    return d


def ks_two(a: list[int], b: list[int]) -> float:
    a, b = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(a) or j < len(b):
        x = min(a[i] if i < len(a) else math.inf, b[j] if j < len(b) else math.inf)
        while i < len(a) and a[i] == x:
            i += 1
        while j < len(b) and b[j] == x:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d


def no_test_reason(asked: dict[str, Any]) -> str | None:
    model = asked.get("model")
    if model in ("poisson", "gamma") and asked.get("rate"):
        return None
    if model in ("trace", "tenants"):
        return None
    return {"constant": "constant gaps", "closed": "closed loop"}.get(str(model), "not asked or a ramp")


def check_fit(v: Verdict, key: str, row: dict[str, Any], arrivals_ns: list[int], lags_ns: list[int],
              asked_offsets: list[float] | None, eps_s: float, why_not: str | None,
              processes: list[Any] | None = None, own_s: float = 0.0) -> str | None:  # fmt: skip
    """Compare the row's ``fit``; a note (what was not checked, because) or None. ``arrivals_ns``
    sorted, each within ``eps_s`` of the section's time (``own_s`` among its own process's
    times, ``processes`` saying whose each is)."""
    s = "delivered"
    got = row.get("fit") or {}
    asked = row.get("asked") or {}
    reason = no_test_reason(asked)
    offsets = [(t - arrivals_ns[0]) / NS_PER_S for t in arrivals_ns]
    gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    if reason is None and len(gaps) < MIN_GAPS:
        reason = f"fewer than {MIN_GAPS} gaps"
    if reason is not None:
        v.exact(s, key, f"fit.test (none: {reason})", got.get("test"), None)
        return None
    resolution = resolution_ms(lags_ns)
    v.exact(s, key, "fit.resolution_ms", got.get("resolution_ms"), resolution)
    v.exact(s, key, "fit.gaps", got.get("gaps"), len(gaps))
    model = asked["model"]
    step = resolution / 1e3
    mine = floored_steps(gaps, step)
    per_gap = gap_uncertainty(arrivals_ns, processes or [None] * len(arrivals_ns), eps_s, own_s)
    flips = near_edges(gaps, step, per_gap)
    if model in ("trace", "tenants"):
        what = "the trace" if model == "trace" else "the tenants' schedule"
        v.exact(s, key, "fit.test", got.get("test"), f"ks-2sample vs {what}'s gaps")
        if asked_offsets is None:
            return f"delivered {key} fit.statistic, fit.p_value, fit.consistent because {why_not}"
        ordered = sorted(asked_offsets)
        asked_gaps = [b - a for a, b in zip(ordered, ordered[1:], strict=False)]
        if len(asked_gaps) < MIN_GAPS:
            v.exact(s, key, "fit.test (none: the trace's part has too few gaps)", got.get("test"), None)
            return None
        d = ks_two(mine, floored_steps(asked_gaps, step))
        d_tol = flips / len(gaps) + near_edges(asked_gaps, step, FLOAT_EPS_S) / len(asked_gaps)
        n_eff = len(gaps) * len(asked_gaps) / (len(gaps) + len(asked_gaps))
    else:
        test = "ks vs exponential" if model == "poisson" else "ks vs gamma"
        v.exact(s, key, "fit.test", got.get("test"), test)
        d = ks_one(mine, step, gap_law(model, float(asked["rate"]), asked.get("cv")))
        d_tol = flips / len(gaps)
        n_eff = len(gaps)
    v.close(s, key, "fit.statistic", got.get("statistic"), d, d_tol + 1e-12, False)
    p_low, p_high = kolmogorov_p(d + d_tol, n_eff), kolmogorov_p(max(d - d_tol, 0.0), n_eff)
    p_got = got.get("p_value")
    mid = (p_low + p_high) / 2
    v.close(s, key, "fit.p_value", p_got, mid, (p_high - p_low) / 2 + 1e-9, False)
    if p_low >= ALPHA or p_high < ALPHA:
        v.exact(s, key, "fit.consistent (as asked)", got.get("consistent"), p_low >= ALPHA)
    return None
