"""loadkit's additions to Locust's web UI: the "LLM" tab, live charts, CSV, final report.

    install_web_ui(environment, runtime)   # from Locust's ``init`` on local / master; no-op without a web UI

Routes (under Locust's --web-base-path): ``/loadkit/`` live charts, ``/loadkit/stats.json``,
``/loadkit/stats.csv``, ``/loadkit/report``. See docs/web-ui.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loadkit.webui.live import LiveView
    from loadkit.webui.runstate import RunState


def install_web_ui(environment: Any, runtime: RunState | None = None) -> LiveView | None:
    """Add loadkit's tab, routes and chart sampler to ``environment.web_ui``, showing what
    ``runtime`` holds (its stats, targets and start results: webui/runstate.py); returns the
    LiveView (None when this node has no web UI, e.g. a worker or a headless run).

    Without ``runtime`` (deprecated, removed in 0.4.0) the view reads ``environment.loadkit``
    at each use, as it used to."""
    if runtime is None:
        import warnings

        from loadkit.webui.runstate import EnvironmentRuntime

        warnings.warn(
            "install_web_ui(environment) without the runtime is deprecated (removed in 0.4.0): "
            "call install_web_ui(environment, runtime)",
            DeprecationWarning,
            stacklevel=2,
        )
        runtime = EnvironmentRuntime(environment)
    if getattr(environment, "web_ui", None) is None:
        return None
    if getattr(environment, "loadkit_web_ui", None) is not None:
        existing: LiveView = environment.loadkit_web_ui
        return existing  # installed once per web UI (routes cannot be added twice)
    from loadkit.webui.live import LiveView

    live = LiveView(environment, runtime)
    live.install()
    environment.loadkit_web_ui = live
    return live


__all__ = ["install_web_ui"]
