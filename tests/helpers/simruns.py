"""Real `loadkit run` invocations against the embedded simulator, for the browser and compare tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAGED_SESSIONS = REPO / "tests" / "report" / "data" / "staged_sessions.toml"


# Not `python -m loadkit.cli`: run as __main__, the module's UserError is a different class from
# the one subcommands import, so a user error would end in a traceback instead of exit 2.
ENTRY = "import sys; from loadkit.cli import main; sys.exit(main())"


def loadkit(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)  # fmt: skip


def sim_run(report_dir: Path, *args: str, seconds: int = 8, users: int = 12) -> Path:
    """One headless run; fails the test with the run's output when no report.json was written."""
    proc = loadkit("run", *args, "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
                   "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
    if not (report_dir / "report.json").is_file():
        raise AssertionError(
            f"run wrote no report (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return report_dir
