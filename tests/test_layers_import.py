"""Only the Locust adaptation imports Locust or gevent (docs/architecture.md, "Packages"): the
workload, the stats, the report, the oracle and the capacity planner import without them.

Each check runs in a fresh interpreter, so what this test process already imported (pytest's
plugins, other tests' Locust runs) cannot hide or fake a dependency.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LOCUST_FREE = (
    "loadkit.workload",
    "loadkit.stats",
    "loadkit.report",
    "loadkit.verify",
    "loadkit.capacity",
)
EVENT_LOOP = ("locust", "gevent")

# Submodules of those packages that adapt to Locust by design: importing them would pull Locust
# in, and nothing else may. None today (the stats' listeners live in loadkit/locust/).
ADAPTERS: frozenset[str] = frozenset()

_PROBE = """
import importlib, json, pkgutil, sys
names = json.loads(sys.argv[1])
walk, skip = sys.argv[2] == "walk", set(json.loads(sys.argv[3]))
for name in names:
    package = importlib.import_module(name)
    if walk:
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            if info.name not in skip:
                importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("locust", "gevent"))))
"""


def _imported_event_loop_modules(names: tuple[str, ...], *, walk: bool) -> list[str]:
    """The locust/gevent modules a fresh interpreter holds after importing ``names``."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE,
            json.dumps(names),
            "walk" if walk else "top",
            json.dumps(sorted(ADAPTERS)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_locust_free_packages_import_without_locust_or_gevent() -> None:
    assert _imported_event_loop_modules(LOCUST_FREE, walk=False) == []


@pytest.mark.parametrize("package", LOCUST_FREE)
def test_every_module_of_a_locust_free_package_imports_without_them(package: str) -> None:
    # A module the package's __init__ does not import could still pull gevent in.
    assert _imported_event_loop_modules((package,), walk=True) == []


def test_the_probe_sees_gevent_when_it_is_imported() -> None:
    # The check itself works: the client's hub reads import gevent on purpose.
    assert "gevent" in _imported_event_loop_modules(("loadkit.client.hubreads",), walk=False)


def test_the_runs_set_up_imports_no_locust_and_only_the_clients_gevent() -> None:
    """loadkit.run builds the configuration from the client's types (``Timeouts``, the TLS
    settings), and the client's hub reads import gevent by design: that much gevent, and no
    Locust, no more (an import of locust or of loadkit.locust would bring both)."""
    held = set(_imported_event_loop_modules(("loadkit.run",), walk=True))
    assert not {m for m in held if m.split(".")[0] == "locust"}
    assert held <= set(_imported_event_loop_modules(("loadkit.client.timer",), walk=False))
