"""A pluggy plugin manager whose hook calls name the plugin that failed.

Every hook call goes through ``pm.hook.<name>(...)``, so pluggy keeps its argument filtering,
its wrappers and its tryfirst/trylast order. To still say *which* plugin raised, each
implementation's function is wrapped once, when its plugin is registered (not per call): the
wrapper tags the exception with the plugin and the hook (``failure_of``).

Two kinds of hook differ in what a failure does:

- *observer* hooks (``CONTAINED``: a finished request, a report file to write, a report
  written) must not let one third-party plugin stop the others (nor loadkit's own report
  writers): the failure is kept in ``pm.failures`` for the call site to take
  (``take_failures``) and the other implementations still run;
- every other hook re-raises the (tagged) exception: a refused option or a bad registration
  stops the run, with the plugin named.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import pluggy

from loadkit.plugins.loading import LoadFailure

CONTAINED = frozenset({"loadkit_request_finished", "loadkit_write_report", "loadkit_report_written"})
# Registration hooks hand every implementation the same ``register`` callback; it reads
# ``pm.calling`` to know which plugin is registering (for its error messages and the registry).
NAMES_CALLER = frozenset(
    {"loadkit_register_engines", "loadkit_register_sim_protocols", "loadkit_register_kinds"}
)
_TAG = "_loadkit_failure"


@dataclass(frozen=True, slots=True)
class HookFailure:
    hook: str
    plugin: str  # the distribution (or registration name) that provides the implementation
    exc: BaseException

    def describe(self) -> str:
        return f"plugin {self.plugin!r} raised {self.exc!r} in {self.hook}"


def failure_of(exc: BaseException) -> HookFailure | None:
    """Which plugin and hook raised ``exc`` (None: it did not come out of a plugin)."""
    return getattr(exc, _TAG, None)


class GuardedPluginManager(pluggy.PluginManager):
    """pluggy's manager, plus per-implementation failure naming and a per-process cache slot
    for registries built from registration hooks (cleared whenever the plugin set changes)."""

    def __init__(self, project_name: str, namer: Callable[[pluggy.PluginManager, Any], str],
                 trusted: tuple[str, ...] = ()) -> None:  # fmt: skip
        super().__init__(project_name)
        self._namer = namer
        # loadkit's own plugins (by registration name): their failure is loadkit's bug and
        # propagates from any hook, as it would without plugins.
        self._trusted = frozenset(trusted)
        self.failures: dict[str, list[HookFailure]] = {}
        self.load_failures: list[LoadFailure] = []  # entry points skipped (plugins/loading.py)
        self.calling: Any = None  # the plugin whose registration hook is running
        self.cache: dict[str, Any] = {}
        # Hooks with at least one implementation: a per-request call site skips a hook nobody
        # implements without paying for pluggy's call (see benchmarks/bench_hooks.py).
        self.implemented: frozenset[str] = frozenset()

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        if registered is not None:
            for caller in self.get_hookcallers(plugin) or []:
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin:
                        # pluggy types `function` Final; replacing it at registration, once, is
                        # what keeps every call a plain pluggy call (order, wrappers, filtering).
                        impl.function = self._guard(caller.name, impl, registered in self._trusted)  # type: ignore[misc]
        self._changed()
        return registered

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        unregistered = super().unregister(plugin, name)
        self._changed()
        return unregistered

    def _changed(self) -> None:
        self.cache.clear()
        callers = vars(self.hook).values()
        self.implemented = frozenset(
            c.name for c in callers if isinstance(c, pluggy.HookCaller) and c.get_hookimpls()
        )

    def take_failures(self, hook: str) -> list[HookFailure]:
        """The contained failures of ``hook`` since the last take (empty on the fast path)."""
        return self.failures.pop(hook, []) if self.failures else []

    def name_of(self, plugin: Any) -> str:
        return self._namer(self, plugin)

    def _tag(self, hook: str, plugin: Any, exc: BaseException) -> HookFailure:
        found = failure_of(exc)
        if found is None:  # the innermost implementation that raised is the one to name
            found = HookFailure(hook, self.name_of(plugin), exc)
            setattr(exc, _TAG, found)
            exc.add_note(f"(raised by plugin {found.plugin!r} in {hook})")
        return found

    def _guard(self, hook: str, impl: Any, trusted: bool) -> Callable[..., Any]:
        function, plugin = impl.function, impl.plugin
        if impl.hookwrapper or impl.wrapper:
            return self._guard_wrapper(hook, plugin, function)
        contain, names = hook in CONTAINED and not trusted, hook in NAMES_CALLER

        def guarded(*args: Any) -> Any:
            if names:
                self.calling = plugin
            try:
                return function(*args)
            except Exception as exc:
                failure = self._tag(hook, plugin, exc)
                if not contain:
                    raise
                self.failures.setdefault(hook, []).append(failure)
                return None
            finally:
                if names:
                    self.calling = None

        guarded.__wrapped__ = function  # type: ignore[attr-defined]
        return guarded

    def _guard_wrapper(self, hook: str, plugin: Any, function: Callable[..., Any]) -> Callable[..., Any]:
        """A wrapper implementation is a generator: delegate to it, name it if it raises. A
        wrapper's own failure always propagates (pluggy cannot skip half a wrapper)."""

        def guarded(*args: Any) -> Generator[Any, Any, Any]:
            try:
                return (yield from function(*args))
            except Exception as exc:
                self._tag(hook, plugin, exc)
                raise

        guarded.__wrapped__ = function  # type: ignore[attr-defined]
        return guarded
