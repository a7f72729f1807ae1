"""Length and time distributions: parse a scenario table, sample with a seeded numpy Generator.

A distribution table has ``dist`` plus its parameters, and optional ``min``/``max`` clipping:

    input = { dist = "lognormal", mean = 800, std = 600, min = 16, max = 8192 }

Token lengths are rounded to integers and clipped to at least 1; times are floats clipped to
at least 0.
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.workload.errors import Ctx, check_keys, get_list, get_number, get_str, get_table, require

# Hard caps on any sample: a mistyped parameter must not ask for a 10^12-token prompt.
MAX_TOKENS = 1 << 20
MAX_SECONDS = 86_400.0
MAX_PARAM = 1e9
FAMILIES = ("fixed", "uniform", "normal", "lognormal", "gamma", "pareto", "zipf", "empirical", "mixture")
_COMMON = ("dist", "min", "max")
PathResolver = Callable[[Ctx, str], Path]


@dataclass(slots=True)
class Distribution:
    """One parsed distribution. ``draw`` samples the unclipped family; ``sample`` clips and rounds."""

    family: str
    params: dict[str, float] = field(default_factory=dict)
    low: float | None = None
    high: float | None = None
    integer: bool = True
    values: np.ndarray | None = None  # empirical
    components: list[Distribution] = field(default_factory=list)  # mixture
    weights: np.ndarray | None = None  # mixture

    def draw(self, rng: np.random.Generator) -> float:
        if self.family == "mixture":
            assert self.weights is not None
            k = int(rng.choice(len(self.components), p=self.weights))
            return self.components[k].sample(rng)
        return _DRAWERS[self.family](self, rng)

    def sample(self, rng: np.random.Generator) -> float:
        cap = float(MAX_TOKENS) if self.integer else MAX_SECONDS
        try:
            value = self.draw(rng)
        except (OverflowError, ValueError):  # numpy refuses ranges beyond float64
            value = math.inf
        if math.isnan(value):
            value = cap
        if self.low is not None:
            value = max(value, self.low)
        if self.high is not None:
            value = min(value, self.high)
        value = min(max(value, 1.0 if self.integer else 0.0), cap)
        return float(round(value)) if self.integer else float(value)

    def sample_int(self, rng: np.random.Generator) -> int:
        return int(self.sample(rng))


def _draw_fixed(d: Distribution, rng: np.random.Generator) -> float:
    return d.params["value"]


def _draw_uniform(d: Distribution, rng: np.random.Generator) -> float:
    return float(rng.uniform(d.params["low"], d.params["high"]))


def _draw_normal(d: Distribution, rng: np.random.Generator) -> float:
    return float(rng.normal(d.params["mean"], d.params["std"]))


def _draw_lognormal(d: Distribution, rng: np.random.Generator) -> float:
    return float(rng.lognormal(d.params["mu"], d.params["sigma"]))


def _draw_gamma(d: Distribution, rng: np.random.Generator) -> float:
    return float(rng.gamma(d.params["shape"], d.params["scale"]))


def _draw_pareto(d: Distribution, rng: np.random.Generator) -> float:
    # numpy's pareto is Lomax; shift by one for the classical Pareto with minimum xm.
    return float((rng.pareto(d.params["alpha"]) + 1.0) * d.params["xm"])


def _draw_zipf(d: Distribution, rng: np.random.Generator) -> float:
    return float(rng.zipf(d.params["a"]) * d.params["scale"])


def _draw_empirical(d: Distribution, rng: np.random.Generator) -> float:
    assert d.values is not None
    return float(d.values[rng.integers(len(d.values))])


_DRAWERS: dict[str, Callable[[Distribution, np.random.Generator], float]] = {
    "fixed": _draw_fixed,
    "uniform": _draw_uniform,
    "normal": _draw_normal,
    "lognormal": _draw_lognormal,
    "gamma": _draw_gamma,
    "pareto": _draw_pareto,
    "zipf": _draw_zipf,
    "empirical": _draw_empirical,
}


def parse_distribution(ctx: Ctx, raw: Any, resolve: PathResolver, *, integer: bool = True) -> Distribution:
    """Validate one distribution table (or a bare number, meaning fixed) and return it."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = get_number(ctx, raw, low=0.0, high=MAX_PARAM)
        return Distribution("fixed", {"value": value}, integer=integer)
    table = get_table(ctx, raw)
    family = get_str(ctx.at("dist"), require(ctx, table, "dist"), FAMILIES)
    dist = _PARSERS[family](ctx, table, resolve, integer)
    dist.integer = integer
    dist.low = _opt_number(ctx.at("min"), table.get("min"))
    dist.high = _opt_number(ctx.at("max"), table.get("max"))
    if dist.low is not None and dist.high is not None and dist.low > dist.high:
        raise ctx.at("max").error(f"expected max >= min ({dist.low:g}), got {dist.high:g}")
    return dist


def _opt_number(ctx: Ctx, value: Any) -> float | None:
    return None if value is None else get_number(ctx, value, low=0.0, high=MAX_PARAM)


def _params(
    ctx: Ctx, table: dict[str, Any], names: tuple[str, ...], **bounds: tuple[float, bool]
) -> dict[str, float]:
    """Read required numeric params; bounds maps name -> (low, strict)."""
    check_keys(ctx, table, _COMMON + names)
    out = {}
    for name in names:
        low, strict = bounds.get(name, (0.0, False))
        out[name] = get_number(
            ctx.at(name), require(ctx, table, name), low=low, high=MAX_PARAM, strict_low=strict
        )
    return out


def _parse_fixed(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    return Distribution("fixed", _params(ctx, table, ("value",)))


def _parse_uniform(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    p = _params(ctx, table, ("low", "high"))
    if p["high"] < p["low"]:
        raise ctx.at("high").error(f"expected high >= low ({p['low']:g}), got {p['high']:g}")
    return Distribution("uniform", p)


def _parse_normal(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    return Distribution("normal", _params(ctx, table, ("mean", "std"), mean=(-math.inf, False)))


def _parse_lognormal(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    """Either log-space (mu, sigma), or the distribution's own (mean, std), or (median, sigma)."""
    if "mu" in table:
        return Distribution("lognormal", _params(ctx, table, ("mu", "sigma"), mu=(-math.inf, False)))
    if "median" in table:
        p = _params(ctx, table, ("median", "sigma"), median=(0.0, True))
        return Distribution("lognormal", {"mu": math.log(p["median"]), "sigma": p["sigma"]})
    p = _params(ctx, table, ("mean", "std"), mean=(1e-6, False))
    sigma2 = math.log1p((p["std"] / p["mean"]) ** 2)
    return Distribution("lognormal", {"mu": math.log(p["mean"]) - sigma2 / 2, "sigma": math.sqrt(sigma2)})


def _parse_gamma(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    """Either (shape, scale) or (mean, cv): shape = 1/cv², scale = mean·cv²."""
    if "shape" in table:
        return Distribution(
            "gamma", _params(ctx, table, ("shape", "scale"), shape=(0.0, True), scale=(0.0, True))
        )
    p = _params(ctx, table, ("mean", "cv"), mean=(0.0, True), cv=(1e-3, False))
    return Distribution("gamma", {"shape": 1.0 / p["cv"] ** 2, "scale": p["mean"] * p["cv"] ** 2})


def _parse_pareto(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    return Distribution("pareto", _params(ctx, table, ("alpha", "xm"), alpha=(0.0, True), xm=(0.0, True)))


def _parse_zipf(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    check_keys(ctx, table, _COMMON + ("a", "scale"))
    a = get_number(ctx.at("a"), require(ctx, table, "a"), low=1.0, high=MAX_PARAM, strict_low=True)
    scale = get_number(ctx.at("scale"), table.get("scale", 1), low=0.0, high=MAX_PARAM, strict_low=True)
    return Distribution("zipf", {"a": a, "scale": scale})


def _parse_empirical(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    check_keys(ctx, table, _COMMON + ("path", "column"))
    path = resolve(ctx.at("path"), get_str(ctx.at("path"), require(ctx, table, "path")))
    column = get_str(ctx.at("column"), require(ctx, table, "column"))
    values = read_csv_columns(ctx, path, (column,))[0]
    return Distribution("empirical", values=values)


def _parse_mixture(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, integer: bool) -> Distribution:
    check_keys(ctx, table, _COMMON + ("components",))
    items = get_list(ctx.at("components"), require(ctx, table, "components"))
    if not items:
        raise ctx.at("components").error("expected at least one component")
    comps, weights = [], []
    for i, item in enumerate(items):
        c_ctx = ctx.at("components").at(i)
        body = dict(get_table(c_ctx, item))
        weights.append(get_number(c_ctx.at("weight"), body.pop("weight", 1.0), low=0.0, strict_low=True))
        comps.append(parse_distribution(c_ctx, body, resolve, integer=integer))
    w = np.asarray(weights, dtype=float)
    return Distribution("mixture", components=comps, weights=w / w.sum())


_PARSERS = {
    "fixed": _parse_fixed,
    "uniform": _parse_uniform,
    "normal": _parse_normal,
    "lognormal": _parse_lognormal,
    "gamma": _parse_gamma,
    "pareto": _parse_pareto,
    "zipf": _parse_zipf,
    "empirical": _parse_empirical,
    "mixture": _parse_mixture,
}


def read_csv_columns(ctx: Ctx, path: Path, columns: tuple[str, ...]) -> list[np.ndarray]:
    """Numeric columns of a CSV with a header row; errors name the file and the missing column."""
    try:
        return [arr.copy() for arr in _cached_columns(str(path), columns)]
    except KeyError as exc:
        raise ctx.error(f"expected a column named {exc.args[0]!r} in {path.name}") from None
    except ValueError as exc:
        raise ctx.error(f"expected numbers in {path.name}: {exc}") from None


@functools.lru_cache(maxsize=16)
def _cached_columns(path: str, columns: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in columns:
            if col not in header:
                raise KeyError(col)
        rows = [[float(row[c]) for c in columns] for row in reader]
    if not rows:
        raise ValueError("no data rows")
    table = np.asarray(rows, dtype=float)
    return tuple(table[:, i] for i in range(len(columns)))
