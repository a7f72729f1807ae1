"""The YAML emitter (loadkit/report/yamltext.py) against PyYAML, which llm-d-benchmark reads
its reports with: every value comes back as written, with its type."""

from __future__ import annotations

import math

import pytest

from loadkit.report.yamltext import dumps, scalar

yaml = pytest.importorskip("yaml")

TRICKY = {
    "plain": "text",
    "looks like yes": "yes",
    "looks like a number": "1e5",
    "looks like null": "null",
    "empty": "",
    "quotes and escapes": 'a "b" \\ c\nnext line\ttab',
    "unicode": "µs — ⌈q·n⌉",
    "colon: in key": "# not a comment",
    "tiny float": 1e-05,
    "huge float": 1e20,
    "negative exponent float": -2.5e-10,
    "whole float": 3.0,
    "int": 42,
    "big int": 2**63,
    "true": True,
    "false": False,
    "none": None,
    "empty dict": {},
    "empty list": [],
    "list of dicts": [{"a": 1, "b": [1, 2]}, {"c": {"d": None}}],
    "list of lists": [[1, 2], [], [["x"]]],
    "nested": {"deeper": {"deepest": [0.1, "s"]}},
}


def test_pyyaml_reads_back_every_value_with_its_type():
    back = yaml.safe_load(dumps(TRICKY))
    assert back == TRICKY
    for key, value in TRICKY.items():
        assert type(back[key]) is type(value), key


def test_floats_always_carry_a_dot_and_non_finite_values_are_yaml_words():
    assert scalar(1e-05) == "1.0e-05" and scalar(1e20) == "1.0e+20" and scalar(0.5) == "0.5"
    assert yaml.safe_load(dumps({"x": math.inf}))["x"] == math.inf
    assert yaml.safe_load(dumps({"x": -math.inf}))["x"] == -math.inf
    assert math.isnan(yaml.safe_load(dumps({"x": math.nan}))["x"])


def test_top_level_lists_and_scalars():
    assert yaml.safe_load(dumps([1, {"a": "b"}])) == [1, {"a": "b"}]
    assert yaml.safe_load(dumps("x")) == "x"
    assert dumps({}) == "{}\n"


def test_a_value_json_cannot_hold_is_refused():
    with pytest.raises(TypeError, match="not a JSON-like value: set"):
        dumps({"a": {1, 2}})
