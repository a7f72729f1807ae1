"""docs/architecture.md draws the layers that CI checks: its diagram, row for row, is the
`layers` contract of pyproject.toml's [tool.importlinter] (which `lint-imports` enforces in
.ci/run). A contract changed without the drawing, or the drawing without the contract, fails."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def contract_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert layers["containers"] == ["loadkit"] and layers["exhaustive"] is True
    return [" ".join(row.split()) for row in layers["layers"]]


def drawn_layers() -> list[str]:
    """The diagram's rows: the code block whose first row is `__main__`, with each row's
    comment in parentheses and the `top` / `bottom` marks taken off."""
    text = (REPO / "docs" / "architecture.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if b.lstrip().startswith("__main__")]
    rows = []
    for line in block.splitlines():
        row = re.sub(r"\(.*?\)", "", line)
        row = re.sub(r"\s+(top|bottom)\s*$", "", row)
        if row.strip():
            rows.append(" ".join(row.split()))
    return rows


def test_the_drawn_layers_are_the_checked_layers():
    assert drawn_layers() == contract_layers()


def test_every_package_and_top_level_module_has_a_layer():
    named = {name for row in contract_layers() for name in re.split(r"\s*[|:]\s*", row)}
    package = REPO / "loadkit"
    present = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    present |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert present == named, (sorted(present - named), sorted(named - present))
