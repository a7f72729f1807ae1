"""Locust's parsed options are read in one place (loadkit/locust/handover.py) and by the web
UI's start-form check, which mirrors what Locust's /swarm applies to them; every other module
takes its part of the run's typed configuration (run/runconfig.py build_run_config)."""

from __future__ import annotations

import ast
from pathlib import Path

import loadkit

ALLOWED = {"loadkit/locust/handover.py", "loadkit/webui/startform.py"}


def reads_of_parsed_options(tree: ast.AST) -> list[int]:
    """Lines that read ``parsed_options``: ``x.parsed_options``, ``getattr(x, "parsed_options"...)``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "parsed_options":
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
        ):
            if any(isinstance(a, ast.Constant) and a.value == "parsed_options" for a in node.args[1:2]):
                lines.append(node.lineno)
    return lines


def test_only_the_handover_reads_locusts_parsed_options() -> None:
    root = Path(loadkit.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        if name in ALLOWED:
            continue
        found += [f"{name}:{line}" for line in reads_of_parsed_options(ast.parse(path.read_text(), name))]
    assert found == [], "read the run's configuration (RunConfig) instead of parsed_options"


def test_the_check_sees_both_forms_of_the_read() -> None:
    tree = ast.parse(
        "a = env.parsed_options\nb = getattr(env, 'parsed_options', None)\nc = 'parsed_options'\n"
    )
    assert reads_of_parsed_options(tree) == [1, 2]
