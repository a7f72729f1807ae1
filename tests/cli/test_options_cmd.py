"""`loadkit options` and `loadkit run --help` list every loadkit option — generated from the
definitions Locust's parser gets, plugins' included — with help, default and LOADKIT_* variable."""

from __future__ import annotations

import argparse
import subprocess
import sys

import configargparse

from loadkit.cli import main as loadkit_main
from loadkit.cli.options_cmd import SECTION_TITLES, describe_default, loadkit_actions, render
from loadkit.hookspecs import hookimpl
from loadkit.plugins import get_plugin_manager
from loadkit.run.options import add_arguments


def _defined() -> list[argparse.Action]:
    """Every option in the "loadkit" group of a parser built as Locust builds it."""
    parser = configargparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    (group,) = [g for g in parser._action_groups if g.title == "loadkit"]
    return list(group._group_actions)


def _entry(text: str, flag: str) -> list[str]:
    """The lines of one option's entry: its heading and the indented help under it."""
    lines = text.splitlines()
    # A heading names every spelling of the option: "  --exact-output, --no-exact-output  [...]".
    start = next(
        i
        for i, line in enumerate(lines)
        if line == f"  {flag}" or line.startswith((f"  {flag} ", f"  {flag},"))
    )
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("      ")), len(lines))
    return lines[start:end]


def test_every_defined_option_is_listed_with_env_var_default_and_help(capsys):
    defined = _defined()
    assert len(defined) >= 20 and {a.dest for a in loadkit_actions()} == {a.dest for a in defined}
    assert loadkit_main(["options"]) == 0
    out = capsys.readouterr().out
    for action in defined:
        entry = _entry(out, action.option_strings[0])
        env = action.env_var  # type: ignore[attr-defined]
        assert env and env.startswith("LOADKIT_") and f"env {env}" in entry[0], (action.dest, entry)
        default = describe_default(action)
        # Either the listing states the default, or the help text does (and is printed in full).
        assert (default is not None and f"default {default}" in entry[0]) or "default" in (
            action.help or ""
        ).lower()
        help_words = " ".join(line.strip() for line in entry[1:])
        assert help_words == " ".join((action.help or "").split()), action.dest


def test_options_are_grouped_as_the_code_defines_them(capsys):
    loadkit_main(["options"])
    out = capsys.readouterr().out
    order = [
        SECTION_TITLES[s] + ":"
        for s in (
            "add_core_arguments",
            "add_target_arguments",
            "add_request_arguments",
            "add_load_arguments",
            "add_run_arguments",
            "add_stats_arguments",
        )
    ]
    positions = [out.index(f"\n{title}\n") for title in order]
    assert positions == sorted(positions)
    # Each option sits under the heading of the function that defined it.
    core = out[positions[0] : positions[1]]
    assert "--scenario SCENARIO" in core and "--engine ENGINE" in core and "--report-dir" not in core
    stats = out[positions[5] :]
    assert "--report-dir REPORT_DIR" in stats and "--slo KEY=MS (repeatable)" in stats


def test_defaults_read_as_typed():
    by_dest = {a.dest: a for a in _defined()}
    assert describe_default(by_dest["engine"]) == "openai"
    assert describe_default(by_dest["request_timeout"]) == "300"
    assert describe_default(by_dest["raw_log"]) == "off"
    assert describe_default(by_dest["model"]) == "none"
    assert describe_default(by_dest["scenario"]) is None  # its help says: (default: uneven_chat)


class _Plugin:
    """A plugin adding an option through the documented hook."""

    @staticmethod
    @hookimpl
    def loadkit_add_arguments(group):
        group.add_argument(
            "--zz-plugin-knob",
            type=int,
            default=7,
            env_var="LOADKIT_ZZ_PLUGIN_KNOB",
            help="a plugin's own knob",
        )


def test_a_plugins_option_is_listed_under_the_plugins_heading():
    plugin = _Plugin()
    pm = get_plugin_manager()
    pm.register(plugin, name="zz-test-plugin")
    try:
        text = render(loadkit_actions())
    finally:
        pm.unregister(plugin)
    tail = text[text.index(f"\n{SECTION_TITLES['plugins']}:\n") :]
    assert "--zz-plugin-knob ZZ_PLUGIN_KNOB  [env LOADKIT_ZZ_PLUGIN_KNOB; default 7]" in tail
    assert "a plugin's own knob" in tail
    assert "--zz-plugin-knob" not in render(loadkit_actions())


def test_loadkit_run_help_lists_the_options_and_its_own():
    out = subprocess.run(
        [sys.executable, "-m", "loadkit.cli", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.startswith("usage: loadkit run [--sim NAME[=PROFILE][,port=PORT]]... [--ui]")
    for action in _defined():
        assert f"  {action.option_strings[0]}" in out and action.env_var in out  # type: ignore[attr-defined]
    assert "`locust --help`" in out and "loadkit scenarios list" in out
