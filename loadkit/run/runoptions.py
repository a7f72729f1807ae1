"""The run's options as plugins see them: one read-only mapping, handed to adapters and hooks.

Locust parses loadkit's options and those plugins add (``loadkit_add_arguments``) into one
``argparse.Namespace``. Plugins get a read-only copy keyed by ``dest`` rather than the
namespace itself, so no plugin can change another's (or loadkit's) settings mid-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pluggy

from loadkit.plugins import PluginError, get_plugin_manager
from loadkit.plugins.guard import failure_of


def run_options(parsed: Any) -> Mapping[str, Any]:
    """``parsed`` (an argparse Namespace, a mapping, or None) as a read-only mapping by dest."""
    if parsed is None:
        return MappingProxyType({})
    values = dict(parsed) if isinstance(parsed, Mapping) else dict(vars(parsed))
    return MappingProxyType(values)


def configure_plugins(options: Mapping[str, Any], pm: pluggy.PluginManager | None = None) -> None:
    """Call ``loadkit_configure`` (one pluggy call); a ValueError becomes a PluginError naming
    the plugin that raised it."""
    pm = pm or get_plugin_manager()
    try:
        pm.hook.loadkit_configure(options=options)
    except ValueError as exc:
        failure = failure_of(exc)
        who = failure.plugin if failure is not None else "unknown"
        raise PluginError(f"plugin {who!r} refused the options: {exc}") from None
