"""loadkit's additions to Locust's web UI: the "LLM" tab, live charts, CSV, final report.

    install_web_ui(environment)   # from Locust's ``init`` on local / master; no-op without a web UI

Routes (under Locust's --web-base-path): ``/loadkit/`` live charts, ``/loadkit/stats.json``,
``/loadkit/stats.csv``, ``/loadkit/report``. See docs/web-ui.md.
"""

from __future__ import annotations

from typing import Any


def install_web_ui(environment: Any) -> Any:
    """Add loadkit's tab, routes and chart sampler to ``environment.web_ui``; returns the
    LiveView (None when this node has no web UI, e.g. a worker or a headless run)."""
    if getattr(environment, "web_ui", None) is None:
        return None
    if getattr(environment, "loadkit_web_ui", None) is not None:
        return environment.loadkit_web_ui  # installed once per web UI (routes cannot be added twice)
    from loadkit.webui.live import LiveView

    live = LiveView(environment)
    live.install()
    environment.loadkit_web_ui = live
    return live


__all__ = ["install_web_ui"]
