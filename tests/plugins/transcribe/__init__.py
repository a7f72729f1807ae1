"""Install the transcription test plugin as a real distribution (``loadkit-transcribe``) with a
``loadkit`` entry point, found through the path like any installed one: a third party's request
kind (``transcription``), the adapter that serves it and the simulator protocol that answers it
(docs/writing-a-plugin.md, "A request kind of your own")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIST = "loadkit_transcribe-0.1.dist-info"
PLUGIN = "loadkit-transcribe"


def install(site: Path) -> dict[str, str]:
    """Lay the plugin out under ``site``; returns the environment that makes a process load it."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "transcribe_plugin.py", site / "transcribe_plugin.py")
    info = site / DIST
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[loadkit]\ntranscribe = transcribe_plugin\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}
