"""Install the flaky-parser test plugin as a real distribution (``loadkit-flaky``) with a
``loadkit`` entry point, found through PYTHONPATH like any installed one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIST = "loadkit_flaky-0.3.dist-info"
PLUGIN = "loadkit-flaky"  # the distribution name the plugin is known by


def install(site: Path) -> dict[str, str]:
    """Lay the plugin out under ``site``; returns the environment that makes a process load it."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "flaky_plugin.py", site / "flaky_plugin.py")
    info = site / DIST
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[loadkit]\nflaky = flaky_plugin\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}
