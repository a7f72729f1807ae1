"""Every repository file a reader is pointed to exists: paths named in docs/ (and its subfolders),
README.md and the comments and docstrings of loadkit/ must resolve in the checkout.

What counts as a path:
- anything under a top-level folder of the repository (``loadkit/stats/metrics.py``,
  ``scenarios/uneven_chat.toml``, ``docs/tls.md``, ``tests/...``, ``scripts/test.sh``, a folder
  written with its trailing ``/``), from the repository's root;
- a file under a loadkit subpackage written without ``loadkit/`` (``locust/runtime.py``), from
  ``loadkit/``;
- a bare ``NAME.md`` (beside the citing file, in docs/ or at the root) and a bare ``name.py``
  (some module of that name in the repository: comments say "see guard.py").

URLs are cut out first; placeholders (``<N>``, ``*``, ``{x}``, ``$VAR``, ``...``, ``NAME``) are
not paths. The few real mentions of files that are not in the repository on purpose (a user's own
project in an example, a file a command writes) are in ALLOWED with the reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOP_DIRS = (".ci", "benchmarks", "deploy", "docs", "locustfiles", "loadkit", "plugins", "scenarios", "scripts", "tests")  # fmt: skip
SUBPACKAGES = tuple(sorted(p.name for p in (REPO / "loadkit").iterdir() if (p / "__init__.py").is_file()))

_EDGE = r"(?<![\w./$@-])"  # not inside a longer word, path, URL, variable or package spec
ROOTED = re.compile(_EDGE + r"((?:" + "|".join(map(re.escape, TOP_DIRS)) + r")/[\w./<>{}*$…-]*)")
IN_PACKAGE = re.compile(_EDGE + r"((?:" + "|".join(SUBPACKAGES) + r")/[\w/<>{}*$…-]*\.py)\b")
BARE = re.compile(_EDGE + r"([\w-]+\.(?:md|py))\b(?![\w/(-])")
URL = re.compile(r"\b[a-z][a-z+.-]*://\S+|\bwww\.\S+")
PLACEHOLDER = re.compile(r"[<>{}*$…]|\.\.\.|\bNAME\b|\bN\b")

# Citing file: another folder its paths are written from, and why.
BASES: dict[str, tuple[str, str]] = {
    "docs/writing-a-plugin.md": ("plugins/loadkit-anthropic", "its layout tree is the plugin's own folder"),
}
# (citing file, path as written): why it is not a repository file.
ALLOWED: dict[tuple[str, str], str] = {
    ("docs/scenarios.md", "loadkit/scenarios/"): "inside a built wheel: setup.py copies scenarios/ there",
    ("loadkit/workload/shipped.py", "loadkit/scenarios/"): "inside a built wheel, as above",
    ("loadkit/workload/paths.py", "loadkit/scenarios/"): "inside a built wheel, as above",
    ("loadkit/stats/taskerrors.py", "file.py"): 'the shape of a value ("file.py:12 in task")',
    # loadkit.locust shares its name with the library it adapts to: this one is Locust's own file.
    ("docs/performance.md", "locust/stats.py"): "Locust's own module (the library), not loadkit/locust/",
}


def _python_prose(path: Path) -> str:
    """The comments and docstrings of one module, joined (code and other strings left out)."""
    source = path.read_text(encoding="utf-8")
    parts = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    return "\n".join(parts)


def _sources() -> Iterator[tuple[Path, str]]:
    for doc in sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md"]):
        yield doc, doc.read_text(encoding="utf-8")
    for module in sorted((REPO / "loadkit").rglob("*.py")):
        yield module, _python_prose(module)


def _module_names() -> set[str]:
    skip = {".git", ".venv", "build", "dist", "__pycache__"}
    return {p.name for p in REPO.rglob("*.py") if not skip & set(p.relative_to(REPO).parts)}


def _mentions(text: str) -> Iterator[tuple[str, str]]:
    """(kind, path as written) for every path-like mention in `text`."""
    text = URL.sub(" ", text)
    for kind, pattern in (("rooted", ROOTED), ("package", IN_PACKAGE), ("bare", BARE)):
        for match in pattern.finditer(text):
            if not PLACEHOLDER.search(match.group(1)):
                yield kind, match.group(1).rstrip(".")  # a sentence's full stop is not part of it


def _is_there(path: Path, folder: bool) -> bool:
    return path.is_dir() if folder else path.exists()


def _exists(kind: str, written: str, citing: str, modules: set[str]) -> bool:
    if kind == "rooted":
        bases = [REPO] + ([REPO / BASES[citing][0]] if citing in BASES else [])
        if any(_is_there(base / written, folder=written.endswith("/")) for base in bases):
            return True
        # plugins/ is both a top-level folder and a loadkit subpackage: "plugins/guard.py" is the latter.
        return written.split("/")[0] in SUBPACKAGES and (REPO / "loadkit" / written).exists()
    if kind == "package":
        return (REPO / "loadkit" / written).is_file()
    if written.endswith(".py"):
        return written in modules
    return any((base / written).is_file() for base in ((REPO / citing).parent, REPO / "docs", REPO))


def _broken() -> tuple[list[str], set[tuple[str, str]]]:
    modules = _module_names()
    broken, allowed_used = [], set()
    for path, text in _sources():
        citing = str(path.relative_to(REPO))
        for kind, written in sorted(set(_mentions(text))):
            if _exists(kind, written, citing, modules):
                continue
            if (citing, written) in ALLOWED:
                allowed_used.add((citing, written))
                continue
            broken.append(f"{citing}: {written}")
    return broken, allowed_used


def test_every_path_named_in_docs_and_docstrings_exists():
    broken, _ = _broken()
    assert not broken, "named but not in the repository:\n" + "\n".join(broken)


def test_every_allowed_exception_is_still_needed():
    _, used = _broken()
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"ALLOWED entries that no longer match anything (remove them): {stale}"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("see loadkit/stats/metrics.py:86 and docs/tls.md", {"loadkit/stats/metrics.py", "docs/tls.md"}),
        (
            "(locust/runtime.py, pluginguard.py; DESIGN.md §1)",
            {"locust/runtime.py", "pluginguard.py", "DESIGN.md"},
        ),
        ("--scenario scenarios/uneven_chat.toml.", {"scenarios/uneven_chat.toml"}),
        ("https://github.com/o/r/blob/main/docs/x.md and scenarios/NAME.toml", set()),
        ("requests.worker<N>.jsonl, tests/..., $LOADKIT_DATA/traces/x.csv, loadkit.locust.runtime", set()),
    ],
)
def test_what_counts_as_a_path(text, found):
    assert {written for _, written in _mentions(text)} == found
