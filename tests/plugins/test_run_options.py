"""Plugins read their own options: AdapterOptions.run_options and the loadkit_configure hook."""

import argparse

import pytest

from loadkit import hookimpl
from loadkit.engines.base import AdapterOptions
from loadkit.plugins import PluginError, new_plugin_manager
from loadkit.run.runoptions import configure_plugins, run_options
from loadkit.servers.targets import TargetSpec, build_target


class Refuses:
    seen: list = []

    @hookimpl
    def loadkit_configure(self, options):
        self.seen.append(dict(options))
        if options.get("my_level") == "bad":
            raise ValueError("--my-level must be low or high, got 'bad'")


def test_run_options_is_a_read_only_copy():
    ns = argparse.Namespace(model="m", my_level="high")
    opts = run_options(ns)
    assert opts["my_level"] == "high"
    with pytest.raises(TypeError):
        opts["my_level"] = "low"  # type: ignore[index]
    ns.my_level = "low"
    assert opts["my_level"] == "high"  # a snapshot: a plugin cannot see (or cause) later changes
    assert dict(run_options(None)) == {}


def test_option_reads_the_value_or_the_default():
    o = AdapterOptions(run_options={"my_level": "high", "unset": None})
    assert (o.option("my_level"), o.option("unset", "d"), o.option("absent", 3)) == ("high", "d", 3)
    assert AdapterOptions().option("my_level", "low") == "low"
    assert "high" not in repr(AdapterOptions(api_key="sk", run_options={"api_key": "sk"}))


def test_build_target_hands_the_options_to_the_adapter():
    target = build_target(
        TargetSpec("t", "http://127.0.0.1:9", "vllm"), None, None, run_options({"my_level": "x"})
    )
    assert target.adapter.options.option("my_level") == "x"


def test_configure_hook_receives_options_and_a_refusal_names_the_plugin():
    pm = new_plugin_manager(load_entry_points=False)
    pm.register(Refuses(), name="loadkit-mylevel")
    configure_plugins(run_options({"my_level": "high"}), pm)
    assert Refuses.seen[-1] == {"my_level": "high"}
    with pytest.raises(PluginError, match=r"'loadkit-mylevel' refused the options: --my-level must be"):
        configure_plugins(run_options({"my_level": "bad"}), pm)
