"""tests/ mirrors loadkit/: the tests of loadkit/X/ live in tests/X/, shared helpers in
tests/helpers/, and the top of tests/ holds only the tests about the whole package (and those of
loadkit's own top-level modules, tests/test_M.py for loadkit/M.py).

The package and module lists are read from loadkit/ when the test runs, not written here: when a
package is split or renamed (loadkit/glue/ into run/ and locust/ in 0.3.0, say), this test names the test
folders that have to follow it.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
LOADKIT = TESTS.parent / "loadkit"

# The folders of tests/ that mirror no package, and why (keep this short).
NOT_MIRRORS = {
    "integration": "real processes (simulator, Locust master and workers) across all packages",
    "llamacpp": "the real llama.cpp server, built from source (opt-in, slow)",
    "helpers": "the helpers the test folders share, one copy each",
}

# The top-level test files that are about the whole package rather than one part of it.
WHOLE_PACKAGE = {
    "test_public_api.py": "every public module and name of docs/api/public.md imports",
    "test_docs_site.py": "the documentation site builds strictly",
    "test_self_contained.py": "the checkout and the wheel carry their own data",
    "test_outcomes_doc.py": "docs/reports.md and the report's definitions name every outcome",
    "test_layout.py": "this file: the layout of tests/",
    "test_docs_paths.py": "every file path the docs and docstrings name exists",
    "test_layers_import.py": "the Locust-free packages import without locust or gevent",
    "test_architecture_doc.py": "docs/architecture.md draws the layers contract of the whole package",
    "test_deploy.py": "the Dockerfile and deploy/kubernetes/ (repository files, not a package part)",
}

# Not tests: pytest's and Python's own files at the top of tests/.
TOP_LEVEL_SUPPORT = {"__init__.py", "conftest.py"}


def loadkit_packages(folder: Path = LOADKIT) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}


def loadkit_modules() -> set[str]:
    return {p.stem for p in LOADKIT.glob("*.py") if not p.name.startswith("_")}


def holds_files(folder: Path) -> bool:
    """A folder git would keep: a file in it or below, other than Python's byte-code caches
    (a folder emptied by a move keeps its __pycache__ on a developer's disk)."""
    return any(p.is_file() and "__pycache__" not in p.parts for p in folder.rglob("*"))


def test_layout_lists_name_what_is_there() -> None:
    """The exception lists stay true: a listed folder or file that is gone is named."""
    assert loadkit_packages(), f"no packages found under {LOADKIT}"
    assert not {name for name in NOT_MIRRORS if not (TESTS / name).is_dir()}
    assert not {name for name in WHOLE_PACKAGE if not (TESTS / name).is_file()}


def test_every_test_folder_names_a_loadkit_package() -> None:
    packages = loadkit_packages() | loadkit_modules()
    folders = {
        p.name
        for p in TESTS.iterdir()
        if p.is_dir() and not p.name.startswith((".", "__")) and holds_files(p)
    }
    strays = sorted(folders - packages - NOT_MIRRORS.keys())
    assert not strays, (
        f"tests/{strays[0]}/ names no package or module of loadkit/ ({', '.join(sorted(packages))}): move its "
        "tests to the folder of the package they test, or list it in NOT_MIRRORS with a reason"
    )


def test_nested_test_folders_name_a_subpackage() -> None:
    """Below a mirrored folder, a folder holding tests mirrors a subpackage; one without tests
    holds fixtures or data (tests/engines/fixtures/, tests/report/data/ ...)."""
    strays = []
    for package in sorted(loadkit_packages()):
        mirror = TESTS / package
        if not mirror.is_dir():
            continue
        for folder in mirror.rglob("*"):
            if not folder.is_dir() or "__pycache__" in folder.parts or not any(folder.glob("test_*.py")):
                continue
            relative = folder.relative_to(TESTS)
            if not (LOADKIT / relative / "__init__.py").is_file():
                strays.append(str(relative))
    assert not strays, f"test folders that mirror no loadkit subpackage: {strays}"


def test_top_level_holds_only_whole_package_tests() -> None:
    modules = loadkit_modules()
    strays = sorted(
        p.name
        for p in TESTS.glob("*.py")
        if p.name not in TOP_LEVEL_SUPPORT
        and p.name not in WHOLE_PACKAGE
        and not (p.name.startswith("test_") and p.name.removeprefix("test_").removesuffix(".py") in modules)
    )
    assert not strays, (
        f"tests/{strays[0]} sits at the top of tests/: move it to tests/<package>/ for the loadkit "
        "package it tests (a helper goes to tests/helpers/), or, if it tests the whole package, "
        "list it in WHOLE_PACKAGE with a reason"
    )
