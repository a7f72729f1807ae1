"""docs/hooks.md has exactly one section per hookspec in loadkit/hookspecs.py."""

import re
from pathlib import Path

from loadkit import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
SECTION = re.compile(r"^## `([a-z_]+)`\s*$", re.MULTILINE)


def hookspec_names() -> set[str]:
    return {name for name, obj in vars(hookspecs).items() if callable(obj) and hasattr(obj, "loadkit_spec")}


def documented() -> list[str]:
    return SECTION.findall(DOC.read_text(encoding="utf-8"))


def test_specs_are_found():
    assert "loadkit_register_engines" in hookspec_names()


def test_every_hookspec_has_a_section():
    assert hookspec_names() - set(documented()) == set()


def test_every_section_names_a_hookspec():
    assert set(documented()) - hookspec_names() == set()


def test_one_section_each():
    names = documented()
    assert len(names) == len(set(names))


def test_each_section_states_where_it_runs_and_its_signature():
    text = DOC.read_text(encoding="utf-8")
    for name in documented():
        body = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert f"`{name}(" in body and "**Runs:**" in body, name
