"""Install the hook-recording test plugin as a real distribution with a ``loadkit`` entry point:
a ``.dist-info`` directory next to the module, found through PYTHONPATH like any installed one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIST = "loadkit_hookrec-0.1.dist-info"


def install(site: Path) -> dict[str, str]:
    """Lay the plugin out under ``site``; returns the environment that makes a process load it."""
    shutil.copy(HERE / "hookrec_plugin.py", site / "hookrec_plugin.py")
    info = site / DIST
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: loadkit-hookrec\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[loadkit]\nhookrec = hookrec_plugin\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "LOADKIT_HOOKREC": str(site / "calls.jsonl")}
