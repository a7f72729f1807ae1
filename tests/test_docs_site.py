"""The documentation site (mkdocs.yml) builds with warnings as errors: every page in the nav,
every link and anchor resolves, and every API-reference object still exists."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_docs_site_builds_strict(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reference = (tmp_path / "api" / "adapters" / "index.html").read_text(encoding="utf-8")
    assert "run_options" in reference and "AdapterExtras" in reference  # generated from the docstrings
