"""scripts/build_llama_server.sh: reuse of a cached binary, and the 'tools missing' exit code."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from loadkit.testing import llamacpp

BASH = shutil.which("bash") or "/bin/bash"
SCRIPT = Path(llamacpp.scripts_dir()) / llamacpp.BUILD_SCRIPT


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_existing_binary_is_reused_without_building(tmp_path: Path):
    out = tmp_path / f"llama-server-{llamacpp.LLAMA_CPP_PYTHON_VERSION}"
    out.mkdir()
    fake = out / "llama-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    # An empty PATH proves nothing else ran: no cmake, no pip, no compiler is reachable.
    proc = _run({"LOADKIT_CACHE": str(tmp_path), "PATH": "", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(fake)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no src/ or build/ created


def test_missing_build_tools_exit_3(tmp_path: Path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(BASH, bindir / "bash")
    proc = _run({"LOADKIT_CACHE": str(tmp_path / "cache"), "PATH": str(bindir), "HOME": str(tmp_path)})
    assert proc.returncode == llamacpp.EXIT_TOOLS_MISSING
    assert "missing build tools: cmake c++ cc" in proc.stderr
    assert not (tmp_path / "cache").exists()


def test_version_is_pinned_in_both_places():
    text = SCRIPT.read_text()
    assert f"LOADKIT_LLAMA_VERSION:-{llamacpp.LLAMA_CPP_PYTHON_VERSION}" in text
    for flag in (
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
        "--target llama-server",
    ):
        assert flag in text
