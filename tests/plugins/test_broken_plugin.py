"""An installed plugin that fails at import is named, skipped and warned about; every command
that does not need it works; asking for the engine it would provide fails naming it.

The broken plugin is a real distribution (a ``.dist-info`` with a ``loadkit`` entry point on a
temporary path, found by importlib.metadata like any installed one) whose module imports a
dependency that is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, run_locust

DIST, VERSION, EP, MODULE = "loadkit-broken", "0.3", "broken", "loadkit_broken_plugin"
ERROR = "ModuleNotFoundError: No module named 'loadkit_missing_dependency'"
NAMED = f"plugin {DIST} {VERSION} (entry point {EP} = {MODULE}) failed to load: {ERROR}"


def install_broken(
    site: Path, ep: str = EP, body: str = "import loadkit_missing_dependency\n"
) -> dict[str, str]:
    (site / f"{MODULE}.py").write_text(body)
    info = site / f"loadkit_broken-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n")
    (info / "entry_points.txt").write_text(f"[loadkit]\n{ep} = {MODULE}\n")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}


@pytest.fixture
def broken(tmp_path: Path) -> dict[str, str]:
    return install_broken(tmp_path)


@pytest.fixture(autouse=True)
def _forget_module() -> Iterator[None]:
    """The in-process tests import the plugin's module (one of them successfully): the next
    test installs its own."""
    yield
    sys.modules.pop(MODULE, None)


def loadkit(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
    )


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "failed to load" in line]


def test_options_work_and_warn_once_naming_the_plugin(broken):
    proc = loadkit("options", env=broken)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--scenario" in proc.stdout  # the usual listing
    assert "Traceback" not in proc.stderr
    lines = warning_lines(proc.stderr)
    assert len(lines) == 1 and NAMED in lines[0] and "skipped" in lines[0], proc.stderr


def test_plugins_lists_the_broken_one_and_the_working_ones(broken):
    proc = loadkit("plugins", env=broken)
    assert proc.returncode == 0, proc.stderr[-2000:]
    listing = orjson.loads(proc.stdout)
    engines = {e["engine"]: e["plugin"] for e in listing["engines"]}
    assert engines["openai"] == "loadkit" and engines["anthropic"] == "loadkit-anthropic"  # others still load
    assert listing["failed"] == [
        {"distribution": DIST, "version": VERSION, "entry_point": f"{EP} = {MODULE}", "error": ERROR}
    ]
    assert len(warning_lines(proc.stderr)) == 1


def test_plugins_listing_has_no_failed_key_without_a_broken_plugin():
    listing = orjson.loads(loadkit("plugins", env={}).stdout)
    assert "failed" not in listing and {"openai", "anthropic"} <= {e["engine"] for e in listing["engines"]}


def test_sim_serves_a_builtin_family(broken, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", broken["PYTHONPATH"])  # sim_process inherits the environment
    with sim_process("--engine", "openai", "--profile", "fast", truth_log=False) as sim:
        assert sim.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("args", [["--engine", EP, "--port", "0"], ["--serve", f"{EP}:0"]])
def test_sim_asked_for_the_broken_plugins_family_names_it(broken, args):
    proc = loadkit("sim", *args, env=broken)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"it would be provided by {NAMED}" in proc.stderr, proc.stderr


def test_sim_unknown_family_names_the_plugins_that_failed(broken):
    proc = loadkit("sim", "--engine", "nosuch", "--port", "0", env=broken)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--engine 'nosuch': unknown engine family" in proc.stderr
    assert f"may be provided by a plugin that did not load: {NAMED}" in proc.stderr, proc.stderr


def test_in_process_registry_skips_it_and_get_engine_names_it(tmp_path, monkeypatch):
    from loadkit.plugins import PluginError, engine_registry, get_engine, load_failures, new_plugin_manager

    install_broken(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # importlib.metadata finds the .dist-info on sys.path
    pm = new_plugin_manager()
    assert [f.describe() for f in load_failures(pm)] == [NAMED]
    assert "anthropic" in engine_registry(pm) and "openai" in engine_registry(pm)
    with pytest.raises(PluginError) as err:
        get_engine(EP, pm)
    assert str(err.value).startswith(f"unknown engine {EP!r}; registered engines: ")
    assert str(err.value).endswith(f"; it would be provided by {NAMED}")
    with pytest.raises(PluginError, match="may be provided by a plugin that did not load"):
        get_engine("nosuch", pm)


def test_a_plugin_that_fails_to_register_is_unregistered(tmp_path, monkeypatch):
    """Importing works but pluggy refuses the hook implementation (an argument the spec does not
    have): the half-registered plugin is removed, so none of its hooks run."""
    from loadkit.plugins import engine_registry, load_failures, new_plugin_manager

    body = (
        "from loadkit import hookimpl\n\n@hookimpl\ndef loadkit_register_engines(register):\n"
        "    raise AssertionError('never called')\n\n@hookimpl\ndef loadkit_configure(nosuch):\n    pass\n"
    )
    install_broken(tmp_path, body=body)
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = new_plugin_manager()
    (failure,) = load_failures(pm)
    assert failure.error.startswith("PluginValidationError: ") and "nosuch" in failure.error
    assert pm.get_plugin(EP) is None
    assert "openai" in engine_registry(pm)  # its loadkit_register_engines did not run


def test_a_plugin_with_a_hook_this_loadkit_lacks_is_skipped(tmp_path):
    """A plugin written for a newer loadkit (a hook with no specification here) is skipped like
    one that fails at import, instead of pluggy's check_pending failing every command."""
    body = (
        "from loadkit import hookimpl\n\n@hookimpl\ndef loadkit_from_the_future(record):\n    pass\n\n"
        "@hookimpl(optionalhook=True)\ndef loadkit_optional_future(record):\n    pass\n"
    )
    env = install_broken(tmp_path, body=body)
    proc = loadkit("plugins", env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (failed,) = orjson.loads(proc.stdout)["failed"]
    assert failed["error"] == (
        "PluginValidationError: unknown hook 'loadkit_from_the_future': "
        "this loadkit has no such hook specification"
    )
    assert loadkit("options", env=env).returncode == 0


def test_allow_list_leaves_the_broken_plugin_alone(broken):
    proc = loadkit("plugins", env={**broken, "LOADKIT_LOAD_PLUGINS": "anthropic"})
    assert proc.returncode == 0 and not warning_lines(proc.stderr)
    assert "failed" not in orjson.loads(proc.stdout)


@pytest.mark.integration
def test_locust_run_works_beside_a_broken_plugin(broken, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", broken["PYTHONPATH"])
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "5") as sim:
        proc = run_locust("--headless", "-u", "2", "-r", "2", "-t", "3s", "--stop-timeout", "5",
                          "--host", sim.url, "--engine", "openai", "--scenario", str(SCENARIOS / "closed_small.toml"),
                          "--report-dir", str(report_dir), "--raw-log", env=broken)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert any(NAMED in line for line in warning_lines(proc.stderr)), proc.stderr[-3000:]
    check_conservation(report_dir)


@pytest.mark.integration
def test_locust_run_asking_for_its_engine_fails_naming_it(broken, tmp_path):
    proc = run_locust("--headless", "-t", "2s", "--host", "http://127.0.0.1:9", "--engine", EP,
                      "--report-dir", str(tmp_path), env=broken, timeout=60)  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"unknown engine {EP!r}" in proc.stderr and f"it would be provided by {NAMED}" in proc.stderr
