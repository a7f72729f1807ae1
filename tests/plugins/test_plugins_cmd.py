"""`loadkit plugins` and a plugin whose simulator protocol it cannot list (the listing itself, with
the example plugin installed, is in test_plugin_distribution.py)."""

import os
import subprocess
import sys
from pathlib import Path


def plugins(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "loadkit.cli", "plugins"],
        capture_output=True,
        timeout=60,
        env={**os.environ, **env},
    )


CLASHING = """
from loadkit import hookimpl

@hookimpl
def loadkit_register_sim_protocols(register):
    from loadkit.sim.families import VLLM_ROUTES
    from loadkit.sim.protocols import SimProtocol
    register(SimProtocol("openai", VLLM_ROUTES))
"""


def test_a_protocol_taking_a_builtin_name_is_an_error_naming_the_plugin(tmp_path: Path):
    (tmp_path / "clash_plugin.py").write_text(CLASHING)
    info = tmp_path / "loadkit_clash-0.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: loadkit-clash\nVersion: 0.2\n")
    (info / "entry_points.txt").write_text("[loadkit]\nclash = clash_plugin\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    out = plugins({"PYTHONPATH": path, "LOADKIT_LOAD_PLUGINS": "clash"})
    assert out.returncode == 2 and out.stdout == b"", out
    assert b"plugin 'loadkit-clash': simulator protocol 'openai' already exists" in out.stderr, out.stderr
