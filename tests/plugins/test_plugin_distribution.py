"""The example third-party distribution is laid out as the design asks, and, when installed,
is loaded through its entry point (and not loaded when LOADKIT_LOAD_PLUGINS excludes it); `loadkit
plugins` lists its engine and its simulator protocol beside the built-in families."""

import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

from loadkit import __version__
from loadkit.sim.families import FAMILIES

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "loadkit-anthropic"


def test_distribution_layout():
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "loadkit-anthropic"
    assert meta["project"]["entry-points"]["loadkit"] == {"anthropic": "loadkit_anthropic"}
    assert (PLUGIN / "src" / "loadkit_anthropic" / "__init__.py").is_file()
    assert list((PLUGIN / "tests").glob("test_*.py"))


def engines(env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "loadkit.cli", "plugins"],
        capture_output=True,
        timeout=60,
        env={**os.environ, **env},
        check=True,
    )
    return {e["engine"] for e in orjson.loads(out.stdout)["engines"]}


@pytest.fixture
def plugin_installed() -> None:
    """The example plugin is part of the test setup: missing is a failure, not a skip."""
    if not any(ep.value == "loadkit_anthropic" for ep in importlib.metadata.entry_points(group="loadkit")):
        pytest.fail(
            "the example plugin is not installed: pip install -e plugins/loadkit-anthropic "
            "(scripts/test.sh does)"
        )


installed = pytest.mark.usefixtures("plugin_installed")


@installed
def test_installed_plugin_is_loaded_only_when_allowed():
    assert "anthropic" in engines({})
    assert "anthropic" in engines({"LOADKIT_LOAD_PLUGINS": "anthropic"})
    assert "anthropic" not in engines({"LOADKIT_LOAD_PLUGINS": "none"})


def protocols(env: dict[str, str]) -> dict[str, dict]:
    out = subprocess.run(
        [sys.executable, "-m", "loadkit.cli", "plugins"],
        capture_output=True,
        timeout=60,
        env={**os.environ, **env},
        check=True,
    )
    return {p["protocol"]: p for p in orjson.loads(out.stdout)["simulator_protocols"]}


@installed
def test_builtin_families_and_the_plugin_protocol_are_listed():
    found = protocols({})
    assert list(found)[: len(FAMILIES)] == list(FAMILIES)
    for name in FAMILIES:
        assert (found[name]["plugin"], found[name]["version"]) == ("loadkit", __version__), found[name]
        assert found[name]["description"] and "/v1/chat/completions" in found[name]["routes"], found[name]
    assert "/v2/models/<model>/generate_stream" in found["triton"]["routes"]
    anthropic = found["anthropic"]
    assert (anthropic["plugin"], anthropic["version"], anthropic["routes"]) == (
        "loadkit-anthropic",
        "0.1.0",
        ["/v1/messages"],
    )
    assert list(protocols({"LOADKIT_LOAD_PLUGINS": "none"})) == list(FAMILIES)


@installed
@pytest.mark.slow
@pytest.mark.integration
def test_plugin_suite_passes_with_nothing_skipped():
    """The distribution's own tests, including a real `loadkit run` that must use the plugin."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests"],
        cwd=PLUGIN,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-3000:]
