"""The cost and tier options: parsing, per-target prices over the command line's, scenario tiers."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from loadkit.run.costtiers import CostTierSettings, add_cost_tier_arguments, run_costs, run_tiers
from loadkit.run.errors import ConfigError
from loadkit.servers.targets import TargetError, parse_target
from loadkit.stats.cost import CostRate


class Group:
    """argparse's group with Locust's extra keywords (env_var, include_in_web_ui) dropped."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(exit_on_error=False)

    def add_argument(self, *args, env_var=None, include_in_web_ui=None, **kw):
        return self.parser.add_argument(*args, **kw)


def parse(*argv):
    g = Group()
    add_cost_tier_arguments(g)
    return g.parser.parse_args(list(argv))


def test_options_parse_into_settings():
    opts = parse("--slo-tier", "a:ttft_ms=100", "--slo-tier", "b:tpot_ms=20,e2e_ms=900", "--gpu-hour-cost", "2.5",
                 "--gpus", "4", "--currency", "EUR")  # fmt: skip
    s = CostTierSettings.from_options(opts)
    assert [t.name for t in s.tiers] == ["a", "b"] and s.tiers[1].limits == {"tpot_ms": 20, "e2e_ms": 900}
    assert (s.gpu_hour_cost, s.gpus, s.currency) == (2.5, 4, "EUR")


@pytest.mark.parametrize("argv", [("--slo-tier", "a:ttfb=1"), ("--gpus", "0"), ("--gpu-hour-cost", "-1")])
def test_bad_option_values_are_refused(argv):
    with pytest.raises(argparse.ArgumentError, match=argv[0].lstrip("-")):
        parse(*argv)


def test_web_form_text_skips_argparse_and_is_still_checked():
    with pytest.raises(ConfigError, match="--slo-tier 'x:nope=1'"):
        CostTierSettings.from_options(SimpleNamespace(slo_tier=["x:nope=1"]))


def test_a_targets_own_price_wins_over_the_command_line():
    s = CostTierSettings(gpu_hour_cost=2.0, gpus=1)
    specs = [parse_target("a=http://h:1,gpu_hour_cost=3.5,gpus=8"), parse_target("b=http://h:2,gpus=2"),
             parse_target("c=http://h:3")]  # fmt: skip
    assert run_costs(s, specs) == {"a": CostRate(3.5, 8), "b": CostRate(2.0, 2), "c": CostRate(2.0, 1)}
    assert run_costs(CostTierSettings(), specs) == {"a": CostRate(3.5, 8)}  # no price: no cost figures


@pytest.mark.parametrize(
    "text", ["a=http://h:1,gpus=two", "a=http://h:1,gpus=0", "a=http://h:1,gpu_hour_cost=-2"]
)
def test_bad_target_cost_parts_name_the_part(text):
    with pytest.raises(TargetError, match=r"--target .*(gpus|gpu_hour_cost)="):
        parse_target(text)


def test_command_line_tiers_replace_the_scenarios():
    scenario = [{"name": "s", "slos": {"ttft_ms": 50.0}}]
    assert [t.name for t in run_tiers(CostTierSettings(), scenario)] == ["s"]
    given = CostTierSettings.from_options(SimpleNamespace(slo_tier=["c:e2e_ms=10"]))
    assert [t.name for t in run_tiers(given, scenario)] == ["c"]


def test_slo_attainment_is_a_percentage_kept_as_a_fraction():
    assert CostTierSettings.from_options(parse()).attainment == 0.9
    assert CostTierSettings.from_options(parse("--slo-attainment", "75")).attainment == 0.75
    with pytest.raises(argparse.ArgumentError, match="slo-attainment"):
        parse("--slo-attainment", "150")
