"""The validator never raises anything but ScenarioError, whatever the TOML-ish input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadkit.workload import Scenario, ScenarioError, parse_scenario
from loadkit.workload.scenario import TOP_KEYS

KEYS = list(TOP_KEYS) + [
    "dist",
    "mean",
    "std",
    "low",
    "high",
    "value",
    "model",
    "rate",
    "users",
    "name",
    "input",
    "output",
    "components",
    "weight",
    "format",
    "path",
    "turns",
    "user_tokens",
    "output_tokens",
    "stages",
    "duration_s",
    "min",
    "max",
    "joint",
    "policy",
    "x",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True),
    st.sampled_from(
        [
            "loadkit.scenario/1",
            "lognormal",
            "mixture",
            "poisson",
            "closed",
            "trace",
            "azure",
            "mooncake",
            "fixed",
            "uniform",
            "",
            "zipf",
            "empirical",
        ]
    ),
    st.text(max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)
    ),
    max_leaves=20,
)


def _with_header(body: dict) -> dict:
    doc = {"schema": "loadkit.scenario/1", "name": "f", "seed": 1}
    doc.update(body)
    return doc


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6), st.booleans())
def test_validator_raises_only_scenario_error(doc, header):
    try:
        result = parse_scenario(_with_header(doc) if header else doc, Path("fuzz.toml"))
    except ScenarioError as exc:
        assert str(exc).startswith("fuzz.toml: ") and "\n" not in str(exc)
    else:
        assert isinstance(result, Scenario)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4))
def test_fuzzed_parts_and_sessions(body):
    for kind in ("parts", "sessions"):
        doc = _with_header({kind: [body] if kind == "parts" else body})
        try:
            sc = parse_scenario(doc, Path("fuzz.toml"))
        except ScenarioError:
            continue
        item = sc.request_source().next_item()  # a valid file must also generate
        assert item is not None


FAMILY_PARAMS = {
    "fixed": ["value"],
    "uniform": ["low", "high"],
    "normal": ["mean", "std"],
    "lognormal": ["mean", "std"],
    "gamma": ["mean", "cv"],
    "pareto": ["alpha", "xm"],
    "zipf": ["a", "scale"],
}
EXTREME = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-10, 10**30),
    st.sampled_from([1e-300, 1e300, 1.0000001, 0.0]),
)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.sampled_from(sorted(FAMILY_PARAMS)), st.data())
def test_extreme_distribution_parameters_validate_or_refuse_and_sample_bounded(family, data):
    from loadkit.workload.distributions import MAX_TOKENS

    table = {"dist": family, **{k: data.draw(EXTREME, label=k) for k in FAMILY_PARAMS[family]}}
    doc = _with_header({"max_requests": 3, "parts": [{"name": "p", "input": table, "output": table}]})
    try:
        sc = parse_scenario(doc, Path("fuzz.toml"))
    except ScenarioError:
        return
    source = sc.request_source()
    for _ in range(3):
        req = source.next_item()
        assert 1 <= req.max_tokens <= MAX_TOKENS and 1 <= req.n_in_target <= MAX_TOKENS
