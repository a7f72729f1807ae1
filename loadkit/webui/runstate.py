"""What the web UI reads of the run: the runtime it is given at install, never fished from
the Locust environment. ``loadkit.locust.runtime.Runtime`` is one; a test may pass any object
with these attributes.
"""

from __future__ import annotations

from typing import Any, Protocol


class RunState(Protocol):
    """The attributes of the process's runtime that the LLM tab, its routes and the start-form
    check rely on (read at each use: the runtime changes them at every test start)."""

    @property
    def stats(self) -> Any:
        """This node's StatsCollector (None: loadkit's stats are not installed)."""

    @property
    def targets(self) -> list[Any]:
        """This run's targets (for the web UI's own queue probe)."""

    @property
    def start_error(self) -> str | None:
        """Why the last start failed, shown in the status panel."""

    @property
    def command_line(self) -> dict[str, Any]:
        """The command line's values, taken at init: --web-base-path, and --report-dir until a
        run has chosen its directory."""


def base_path(runtime: RunState) -> str:
    """Locust's --web-base-path without its trailing slash ('' at the root)."""
    return str(runtime.command_line.get("web_base_path") or "").rstrip("/")


def given_report_dir(runtime: RunState) -> str:
    """--report-dir as given ('' when each run gets a new ``reports/<UTC start>``)."""
    return str(runtime.command_line.get("report_dir") or "")


class EnvironmentRuntime:
    """The runtime as ``install_web_ui(environment)``, called without one, has always found it:
    ``environment.loadkit``, read at each use (absent: no stats, no targets, nothing to check).
    Deprecated with that call form; removed in 0.4.0."""

    def __init__(self, environment: Any) -> None:
        self._env = environment

    @property
    def _runtime(self) -> Any:
        return getattr(self._env, "loadkit", None)

    @property
    def stats(self) -> Any:
        return getattr(self._runtime, "stats", None)

    @property
    def targets(self) -> list[Any]:
        targets: list[Any] = getattr(self._runtime, "targets", None) or []
        return targets  # the runtime's own list: the queue probe rebuilds only when it changes

    @property
    def start_error(self) -> str | None:
        return getattr(self._runtime, "start_error", None)

    @property
    def command_line(self) -> dict[str, Any]:
        # The runtime's: the command line's values, taken at init (locust/runtime.py).
        return dict(getattr(self._runtime, "command_line", None) or {})

    def __getattr__(self, name: str) -> Any:
        # server_metrics, check_start, starts_begun, starts_done: the runtime's, when it has them
        # (hasattr then tells a runtime without them, as it did before).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._runtime, name)
