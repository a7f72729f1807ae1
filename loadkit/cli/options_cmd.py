"""`loadkit options`: every option loadkit adds to Locust, grouped as the code defines them.

Locust's own ``--help`` exits before the locustfile is imported, and the locustfile is what adds
loadkit's options, so they never appear there. This listing is generated from the same
definitions Locust's parser gets (:func:`loadkit.run.options.add_arguments`, plugins included),
so it cannot drift from them. `loadkit run --help` prints it too.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any

# Titles for the add_*_arguments functions of loadkit.run.options and loadkit.stats; a new
# function without an entry is titled from its name.
SECTION_TITLES = {
    "add_core_arguments": "Engine, model, scenario",
    "add_target_arguments": "Targets",
    "add_request_arguments": "Requests: retries, timeouts, budget",
    "add_load_arguments": "Open loop and warm-up",
    "add_run_arguments": "Run extras",
    "add_stats_arguments": "Stats and reports",
    "plugins": "Added by installed plugins",
}
HEADER = """\
loadkit's options, on top of Locust's own (`locust --help`: users, spawn rate, run time,
headless, distributed, web UI). Each option can also be set by its LOADKIT_* environment
variable or in a Locust config file (e.g. `engine = vllm` in locust.conf)."""
FOOTER = "Shipped scenarios for --scenario: `loadkit scenarios list`."
# Help texts that state their default ("(default 5)", "Default: one target from --host").
_STATES_DEFAULT = re.compile(r"\(default\b|\bdefault:", re.IGNORECASE)


def loadkit_actions() -> list[argparse.Action]:
    """The parser actions loadkit (and its plugins) add, in definition order."""
    import configargparse  # Locust's parser class: it understands env_var

    from loadkit.run.options import add_arguments

    parser = configargparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return [a for a in parser._actions if hasattr(a, "loadkit_section")]


def section_title(section: str) -> str:
    if section in SECTION_TITLES:
        return SECTION_TITLES[section]
    return section.removeprefix("add_").removesuffix("_arguments").replace("_", " ").capitalize()


def describe_default(action: argparse.Action) -> str | None:
    """The default as a user would type it; None when the help text already states it."""
    if isinstance(action, argparse._StoreTrueAction):
        return "off"
    if _STATES_DEFAULT.search(action.help or ""):
        return None
    value: Any = action.default
    if value in (None, "", []):
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _heading(action: argparse.Action) -> str:
    flags = ", ".join(action.option_strings)
    if action.nargs != 0:
        flags += f" {action.metavar or action.dest.upper()}"
    if isinstance(action, argparse._AppendAction):
        flags += " (repeatable)"
    facts = [f"env {getattr(action, 'env_var', None) or '-'}"]
    default = describe_default(action)
    if default is not None:
        facts.append(f"default {default}")
    if not getattr(action, "include_in_web_ui", True):
        facts.append("not in the web UI form")
    return f"  {flags}  [{'; '.join(facts)}]"


def render(actions: list[argparse.Action], width: int = 100) -> str:
    lines = [HEADER]
    section = None
    for action in actions:
        if action.loadkit_section != section:  # type: ignore[attr-defined]
            section = action.loadkit_section  # type: ignore[attr-defined]
            lines += ["", f"{section_title(section)}:"]
        lines.append(_heading(action))
        # No breaks inside option names such as --client-key.
        lines += textwrap.wrap(
            action.help or "",
            width=width,
            initial_indent=" " * 6,
            subsequent_indent=" " * 6,
            break_on_hyphens=False,
        )
    return "\n".join([*lines, "", FOOTER])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="loadkit options", description="list every option loadkit adds to Locust"
    )
    parser.parse_args(argv)
    print(render(loadkit_actions()))
    return 0
