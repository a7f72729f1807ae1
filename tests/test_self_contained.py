"""The project stands alone: its data is inside it (with licenses and attribution), nothing looks
beside the checkout for data, and a built wheel carries the shipped scenarios and traces."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from loadkit.workload.paths import PACKAGE_DATA

REPO = Path(__file__).resolve().parents[1]
TRACES = PACKAGE_DATA / "traces"
# Assembled so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join([r"\.\./" + "shared", "shared" + r"/data", r"parents\[2\]\s*/\s*\"scenarios\""])
)
SCANNED = [
    "loadkit",
    "tests",
    "docs",
    "scripts",
    ".ci",
    "locustfiles",
    "benchmarks",
    "plugins",
    "README.md",
    "pyproject.toml",
]


def _text_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        root = REPO / name
        candidates = [root] if root.is_file() else root.rglob("*")
        files += [
            p
            for p in candidates
            if p.is_file()
            and p.suffix not in (".csv", ".jsonl", ".pyc", ".gguf")
            and "__pycache__" not in p.parts
            and p.stat().st_size < 2_000_000
        ]
    return files


def test_nothing_looks_outside_the_project_for_data():
    hits = []
    for path in _text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        hits += [
            f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for m in OUTSIDE.finditer(text)
        ]
    assert not hits, hits


@pytest.mark.parametrize("folder", ["azure-llm-2023", "mooncake-fast25", "sharegpt-lengths"])
def test_each_shipped_trace_has_its_license_and_attribution(folder):
    files = {p.name for p in (TRACES / folder).iterdir()}
    licenses = [name for name in files if name.startswith("LICENSE")]
    data = [name for name in files if not name.startswith("LICENSE")]
    assert licenses and data, files
    text = (TRACES / folder / licenses[0]).read_text(encoding="utf-8-sig")
    assert "Apache License" in text or "Attribution 4.0 International" in text
    readme = (TRACES / "README.md").read_text()
    assert all(f"| {folder}/ | {name} |" in readme for name in data), (folder, data)
    assert f"`{licenses[0]}`" in readme


def test_the_servegen_sample_has_its_license_and_every_file_is_attributed():
    folder = TRACES / "servegen"
    text = (folder / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text
    data = sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != "LICENSE"
    )
    assert len(data) == 8, data  # language m-mid chunks 0 and 1, reason deepseek-r1 chunk 14, mm-image 11
    readme = (TRACES / "README.md").read_text()
    assert "| servegen/ |" in readme and "alibaba/ServeGen" in readme and "`LICENSE`" in readme
    assert all(f"`{name}`" in readme for name in data), data
    assert "Not shipped yet" not in readme


@pytest.mark.slow
@pytest.mark.integration
def test_a_built_wheel_carries_the_shipped_scenarios_and_traces(tmp_path):
    # Built from a copy, so no build/ or egg-info lands in the checkout.
    src = tmp_path / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "reports", "test-artifacts", "__pycache__"
        ),
    )
    out = tmp_path / "dist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = out.glob("loadkit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # The top-level scenarios/ goes into the wheel as loadkit/scenarios/ (setup.py's build step).
    wanted = [f"loadkit/scenarios/{p.name}" for p in (REPO / "scenarios").glob("*.toml")]
    wanted += [str(p.relative_to(REPO)) for p in (REPO / "loadkit" / "data").rglob("*") if p.is_file()]
    missing = [name for name in wanted if name not in names]
    assert len(wanted) >= 15 and not missing, missing
