"""The public API is the list on docs/api/public.md: every name on it imports from its module,
`loadkit.__all__` is its first row, the API reference and the docs' import lines stay inside
it, and every deprecated path imports, warns naming its new module and re-exports its names."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "api" / "public.md"
CODE = re.compile(r"`([^`]+)`")


def tables(section: str) -> list[list[str]]:
    """The rows (cells) of every table under the ``## section`` heading of the page."""
    text = PAGE.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in text.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row] for row in rows]


def public() -> dict[str, list[str]]:
    listed: dict[str, list[str]] = {}
    for module, names in tables("Public modules"):
        (name,) = CODE.findall(module)
        assert name not in listed, f"{name} listed twice"
        listed[name] = CODE.findall(names)
    return listed


def deprecated() -> list[tuple[str, str, list[str], str]]:
    return [
        (CODE.findall(old)[0], CODE.findall(new)[0], CODE.findall(names), removed.strip())
        for old, new, names, removed in tables("Deprecated paths")
    ]


def test_the_page_is_parsed():
    listed = public()
    assert len(listed) >= 20 and all(listed.values())
    assert {"loadkit", "loadkit.types", "loadkit.client.timer", "loadkit.sim.protocols"} <= set(listed)
    assert {old for old, *_ in deprecated()} == {
        "loadkit.sse",
        "loadkit.timer",
        "loadkit.detect",
        "loadkit.engines.detect",
        "loadkit.runoptions",
        "loadkit.glue.runoptions",
        "loadkit.glue.user",
        "loadkit.glue.scenario_user",
        "loadkit.glue.api",
        "loadkit.glue.locustfile",
    }


def test_top_level_all_is_the_first_row():
    import loadkit

    assert sorted(public()["loadkit"]) == sorted(loadkit.__all__)


def test_every_documented_name_imports():
    """In a fresh process: `LLMUser` and friends import Locust, whose monkey-patching must not
    reach this test process. A public path must not be a deprecated one (no moved-module warning)."""
    script = r"""
import importlib, json, sys, warnings
listed = json.loads(sys.argv[1])
missing, moved = [], []
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for module, names in listed.items():
        try:
            mod = importlib.import_module(module)
        except Exception as exc:
            missing.append(f"{module}: {type(exc).__name__}: {exc}")
            continue
        for name in names:
            try:
                getattr(mod, name)
            except AttributeError:
                missing.append(f"{module}.{name}")
moved = [str(w.message) for w in seen if issubclass(w.category, DeprecationWarning) and "has moved to" in str(w.message)]
print(json.dumps({"missing": missing, "moved": moved}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(public())],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result == {"missing": [], "moved": []}


def test_packages_with_all_export_their_listed_names():
    """In a fresh process, as above: some listed modules (the user classes) import Locust, whose
    gevent patching must not happen inside this test process (it deadlocked the suite here)."""
    script = r"""
import importlib, json, sys
lacking = {}
for module, names in json.loads(sys.argv[1]).items():
    declared = getattr(importlib.import_module(module), "__all__", None) if module != "loadkit" else None
    if declared is not None and not set(names) <= set(declared):
        lacking[module] = sorted(set(names) - set(declared))
print(json.dumps(lacking))
"""
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(public())], capture_output=True, text=True,
                          timeout=120, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {}, "these modules' __all__ lack listed names"


def _inside(target: str, listed: dict[str, list[str]]) -> bool:
    if target in listed:
        return True
    module, _, name = target.rpartition(".")
    return name in listed.get(module, ()) or any(m.startswith(target + ".") for m in listed)


def test_api_reference_pages_document_only_public_names():
    listed = public()
    for page in sorted((REPO / "docs" / "api").glob("*.md")):
        for target in re.findall(r"^::: (\S+)", page.read_text(), flags=re.M):
            if target.startswith("loadkit."):
                assert _inside(target, listed), f"{page.name}: ::: {target} is not on docs/api/public.md"


def test_docs_import_lines_use_only_public_names():
    listed = public()
    pages = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    pattern = re.compile(r"^\s*from (loadkit(?:\.[\w.]+)?) import \(?([\w, ]+)\)?", flags=re.M)
    for page in pages:
        for module, names in pattern.findall(page.read_text()):
            for name in filter(None, (n.strip() for n in names.split(","))):
                assert _inside(f"{module}.{name}", listed), f"{page.name}: from {module} import {name}"


@pytest.mark.parametrize(
    ("old", "new", "names", "removed"), deprecated(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_deprecated_path_warns_and_reexports(old, new, names, removed):
    """In a fresh process, as above: a moved user class's old path imports Locust."""
    script = r"""
import importlib, json, sys, warnings
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    exec(compile(f"import {old}", "the_importer.py", "exec"), {})
moved = [(str(w.message), w.filename) for w in seen if issubclass(w.category, DeprecationWarning)]
shim, target = sys.modules[old], importlib.import_module(new)
same = {name: getattr(shim, name) is getattr(target, name) for name in shim.__all__}
print(json.dumps({"moved": moved, "all": sorted(shim.__all__), "same": same}))
"""
    proc = subprocess.run([sys.executable, "-c", script, old, new], capture_output=True, text=True,
                          timeout=120, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    message = f"{old} has moved to {new}: import from {new} ({old} will be removed in loadkit {removed})"
    # One warning, attributed to the import line (not to loadkit), naming the new module.
    assert result["moved"] == [[message, "the_importer.py"]]
    assert result["all"] == sorted(names)
    assert result["same"] == dict.fromkeys(names, True)


def test_version_is_the_distributions_and_has_a_changelog_section():
    import loadkit

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert loadkit.__version__ == importlib.metadata.version("loadkit") == declared == "0.2.0"
    assert f"\n## [{declared}]\n" in (REPO / "CHANGELOG.md").read_text()
