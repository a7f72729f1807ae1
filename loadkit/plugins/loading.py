"""Loading third-party plugins from their entry points, one at a time.

pluggy's ``load_setuptools_entrypoints`` stops at the first plugin that raises, with a bare
traceback that names no distribution, and every command then fails — even those that need no
plugin. Here each entry point is loaded on its own (through pluggy, by name, so its
distribution bookkeeping is kept): one that fails to import or register is recorded as a
``LoadFailure`` (distribution, entry point, error), skipped and warned about once per process;
the others load. Only asking for what the broken plugin would have provided fails, with its
error (``loadkit.plugins.get_engine``, ``loadkit sim --engine``).
"""

from __future__ import annotations

import importlib.metadata
import logging
from dataclasses import dataclass

import pluggy

log = logging.getLogger("loadkit.plugins")
_warned: set[LoadFailure] = set()


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """One entry point that could not be loaded, and why."""

    distribution: str  # the distribution's name, as in its metadata
    version: str
    entry_point: str  # the entry point's name (often the engine it provides)
    value: str  # what it points to: ``module`` or ``module:attribute``
    error: str  # ``ExceptionType: message``

    def describe(self) -> str:
        return (
            f"plugin {self.distribution} {self.version} (entry point {self.entry_point} = {self.value}) "
            f"failed to load: {self.error}"
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": f"{self.entry_point} = {self.value}",
            "error": self.error,
        }


def load_entry_points(pm: pluggy.PluginManager, group: str, allowed: set[str] | None) -> list[LoadFailure]:
    """Register every loadable entry point of ``group`` (only the names in ``allowed``, if
    given) in distribution order, as pluggy would; return those that failed."""
    failures: list[LoadFailure] = []
    tried: set[str] = set()
    for dist in list(importlib.metadata.distributions()):
        for ep in dist.entry_points:
            if ep.group != group or (allowed is not None and ep.name not in allowed) or ep.name in tried:
                continue
            # pluggy, asked for this name, loads the first distribution (in this same order)
            # that has it: this one. A second distribution with the name is skipped, as pluggy
            # skips a name already registered (and a failed one is not imported twice).
            tried.add(ep.name)
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                pm.load_setuptools_entrypoints(group, name=ep.name)
                _check_hooks(pm, ep.name)
            except Exception as exc:  # any failure of a third-party import, registration or hook check
                if pm.get_plugin(ep.name) is not None:  # registration failed half-way: undo it
                    pm.unregister(name=ep.name)
                failures.append(
                    LoadFailure(
                        dist.name or "(unnamed distribution)",
                        dist.version or "unknown",
                        ep.name,
                        ep.value,
                        f"{type(exc).__name__}: {exc}",
                    )
                )
    return failures


def _check_hooks(pm: pluggy.PluginManager, name: str) -> None:
    """pluggy's ``check_pending`` for one plugin: a hook this loadkit has no specification of
    (a plugin written for a newer loadkit) fails that plugin here, not every command later."""
    plugin = pm.get_plugin(name)
    for caller in pm.get_hookcallers(plugin) or []:
        if not caller.has_spec() and any(
            i.plugin is plugin and not i.optionalhook for i in caller.get_hookimpls()
        ):
            raise pluggy.PluginValidationError(
                plugin, f"unknown hook {caller.name!r}: this loadkit has no such hook specification"
            )


def warn_once(failures: list[LoadFailure]) -> None:
    """One warning line per broken plugin per process (plugin managers are built more than once)."""
    for failure in failures:
        if failure not in _warned:
            _warned.add(failure)
            log.warning("loadkit: %s; skipped (commands that need it will fail)", failure.describe())


def unavailable_note(name: str, failures: list[LoadFailure]) -> str:
    """What to add to an "unknown engine/protocol ``name``" error while plugins failed to load:
    the plugin whose entry point is ``name`` if there is one, else every broken plugin."""
    exact = [f for f in failures if f.entry_point == name]
    if exact:
        return "; it would be provided by " + "; ".join(f.describe() for f in exact)
    if failures:
        return "; it may be provided by a plugin that did not load: " + "; ".join(
            f.describe() for f in failures
        )
    return ""
