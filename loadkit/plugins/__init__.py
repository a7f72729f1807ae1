"""The plugin manager factory and the engine registry built from it.

Nothing is loaded at import time: callers ask `get_plugin_manager()` (cached per process)
and the registry it yields. A third-party plugin that fails to load is skipped with a warning
and kept in ``pm.load_failures`` (plugins/loading.py); only asking for its engine fails.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pluggy

from loadkit import hookspecs
from loadkit.core.adapter import EngineAdapter
from loadkit.core.kinds import BUILTIN_KINDS, RequestKind
from loadkit.errors import UserError
from loadkit.plugins import loading
from loadkit.plugins.guard import GuardedPluginManager
from loadkit.plugins.loading import LoadFailure, unavailable_note

ENTRY_POINT_GROUP = "loadkit"
# Registration order matters where pluggy's order does: among implementations of equal
# priority the last registered runs first, so report.json (report.files) is written before
# report.html (report.plugin).
BUILTIN_PLUGINS = (
    "loadkit.engines.builtin",
    "loadkit.report.plugin",
    "loadkit.report.files",
    "loadkit.report.llmdfiles",
    "loadkit.sim.builtin",
)


class PluginError(RuntimeError, UserError):
    """A plugin could not be loaded or registered something invalid."""


@dataclass(frozen=True, slots=True)
class EngineInfo:
    name: str
    adapter: type[EngineAdapter]
    plugin: str
    version: str
    description: str


def _allowed_plugins() -> set[str] | None:
    raw = os.environ.get("LOADKIT_LOAD_PLUGINS")
    if raw is None:
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


def new_plugin_manager(load_entry_points: bool = True) -> GuardedPluginManager:
    """A fresh plugin manager with the built-ins and (optionally) installed plugins."""
    pm = GuardedPluginManager("loadkit", plugin_name, trusted=BUILTIN_PLUGINS)
    pm.add_hookspecs(hookspecs)
    for modname in BUILTIN_PLUGINS:
        module = __import__(modname, fromlist=["_"])
        pm.register(module, name=modname)
    if load_entry_points:
        pm.load_failures = loading.load_entry_points(pm, ENTRY_POINT_GROUP, _allowed_plugins())
        loading.warn_once(pm.load_failures)
    pm.check_pending()
    return pm


def load_failures(pm: pluggy.PluginManager | None = None) -> list[LoadFailure]:
    """The installed plugins that failed to load (and were skipped) in ``pm``."""
    pm = pm or get_plugin_manager()
    return list(getattr(pm, "load_failures", ()))


@lru_cache(maxsize=1)
def get_plugin_manager() -> GuardedPluginManager:
    return new_plugin_manager()


def _plugin_version(pm: pluggy.PluginManager, plugin: Any) -> tuple[str, str]:
    for plug, dist in pm.list_plugin_distinfo():
        if plug is plugin:
            return dist.project_name, dist.version
    name = pm.get_name(plugin) or repr(plugin)
    if name.startswith("loadkit."):
        from loadkit import __version__

        return "loadkit", __version__
    return name, "unknown"


def plugin_name(pm: pluggy.PluginManager, plugin: Any) -> str:
    """The distribution that provides ``plugin`` (or loadkit's own module name)."""
    return _plugin_version(pm, plugin)[0]


def engine_registry(pm: pluggy.PluginManager | None = None) -> dict[str, EngineInfo]:
    """Every registered engine by name, each with the plugin (distribution) that provides it.

    Built once per plugin manager (so once per process) and rebuilt only when the plugin set
    changes; callers must not mutate the dict."""
    registry: dict[str, EngineInfo] = _cached(pm or get_plugin_manager(), "engines", _build_registry)
    return registry


def _cached(pm: pluggy.PluginManager, key: str, build: Callable[[pluggy.PluginManager], Any]) -> Any:
    """``build(pm)``, kept in the plugin manager's cache under ``key`` (a GuardedPluginManager
    empties it when its plugin set changes); built anew for any other manager."""
    cache = pm.cache if isinstance(pm, GuardedPluginManager) else {}
    if key not in cache:
        cache[key] = build(pm)
    return cache[key]


def _build_registry(pm: pluggy.PluginManager) -> dict[str, EngineInfo]:
    by_plugin: dict[int, list[EngineInfo]] = {}

    def register(adapter: type[EngineAdapter]) -> None:
        plugin = getattr(pm, "calling", None)  # set by GuardedPluginManager around each implementation
        who, version = _plugin_version(pm, plugin)
        if not (isinstance(adapter, type) and issubclass(adapter, EngineAdapter)) or not adapter.name:
            raise PluginError(f"plugin {who!r} registered {adapter!r}, not a named EngineAdapter subclass")
        by_plugin.setdefault(id(plugin), []).append(
            EngineInfo(adapter.name, adapter, who, version, adapter.description)
        )

    pm.hook.loadkit_register_engines(register=register)
    # pluggy calls the newest plugin first; the registry (the probe order of --engine auto, and
    # who is named first in a clash) follows plugin registration order, built-ins first.
    registry: dict[str, EngineInfo] = {}
    for impl in pm.hook.loadkit_register_engines.get_hookimpls():
        for info in by_plugin.get(id(impl.plugin), []):
            if info.name in registry:
                other = registry[info.name].plugin
                raise PluginError(
                    f"engine {info.name!r} registered twice: by {other!r} and by {info.plugin!r}"
                )
            registry[info.name] = info
    return registry


@dataclass(frozen=True, slots=True)
class KindInfo:
    kind: RequestKind
    plugin: str


def kind_registry(pm: pluggy.PluginManager | None = None) -> dict[str, KindInfo]:
    """Every request kind by name: loadkit's (chat, embeddings, rerank), then the plugins' from
    ``loadkit_register_kinds``. Built once per plugin manager, like the engine registry."""
    registry: dict[str, KindInfo] = _cached(pm or get_plugin_manager(), "kinds", _build_kinds)
    return registry


def _build_kinds(pm: pluggy.PluginManager) -> dict[str, KindInfo]:
    registry = {k.name: KindInfo(k, "loadkit") for k in BUILTIN_KINDS}

    def register(kind: RequestKind) -> None:
        who = _plugin_version(pm, getattr(pm, "calling", None))[0]
        if not isinstance(kind, RequestKind) or not kind.name:
            raise PluginError(f"plugin {who!r} registered {kind!r}, not a named RequestKind")
        if kind.name in registry:
            raise PluginError(
                f"request kind {kind.name!r} registered twice: by {registry[kind.name].plugin!r} and by {who!r}"
            )
        if kind.build is None:
            raise PluginError(
                f"plugin {who!r} registered request kind {kind.name!r} without a build function"
            )
        registry[kind.name] = KindInfo(kind, who)

    pm.hook.loadkit_register_kinds(register=register)
    return registry


def get_kind(name: str, pm: pluggy.PluginManager | None = None) -> RequestKind:
    """The registered kind ``name``; an error listing the known kinds otherwise."""
    registry = kind_registry(pm)
    if name not in registry:
        raise PluginError(f"unknown request kind {name!r}; registered kinds: {', '.join(registry)}")
    return registry[name].kind


def plugin_fingerprint(pm: pluggy.PluginManager | None = None) -> dict[str, str]:
    """{engine name: "plugin==version"}: master and workers must agree on this."""
    return {name: f"{info.plugin}=={info.version}" for name, info in sorted(engine_registry(pm).items())}


def get_engine(name: str, pm: pluggy.PluginManager | None = None) -> EngineInfo:
    registry = engine_registry(pm)
    if name not in registry:
        known = ", ".join(sorted(registry)) or "none"
        note = unavailable_note(name, load_failures(pm))
        raise PluginError(
            f"unknown engine {name!r}; registered engines: {known} (see `loadkit plugins`){note}"
        )
    return registry[name]
