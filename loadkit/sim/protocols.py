"""Wire protocols ``loadkit sim`` serves, all registered through ``loadkit_register_sim_protocols``.

The built-in families are registered through that hook too (``loadkit.sim.builtin``), first;
plugins add theirs after them. A protocol says how to read a generation request and how to
frame its answer; the simulator supplies the rest — continuous batching, the prefix cache,
preemption, faults, the truth log — the same for every protocol. Everything a protocol author needs is importable from
here::

    from loadkit.sim.protocols import GenRoute, Outcome, RequestSpec, SimProtocol, StreamFormat

A kind answered in one body (embeddings, rerank, a plugin's kind) parses into a RequestSpec
with ``kind`` and ``item_tokens`` (each item's prompt tokens) set, and answers with a
``KindFormat`` whose ``body(text, outcome)`` is the whole answer: the simulator prefills the
items' tokens in the shared batch and writes that body when the prefill is done.

``StreamFormat`` methods frame one request's stream: ``start()`` (bytes sent just before the
first token: a role chunk, a message header), ``token(text, index, n)`` (one event carrying
``n`` tokens whose text is ``text``, already JSON-safe: use ``json_str``), ``end(outcome)``
(finish event, usage, end marker), ``error(message)`` (an in-band error, for the
``error_event`` fault), ``malformed()`` (an event no parser accepts, for ``malformed_event``),
``body(text, outcome)`` (the whole answer when the request did not ask to stream). Set
``fixed_frame = True`` when ``token`` is the same bytes around the text for every index: the
simulator then writes tokens on its fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from loadkit.errors import UserError
from loadkit.sim.families import GenRoute, Parser, match_route
from loadkit.sim.wire.common import (
    Outcome,
    RequestSpec,
    StreamFormat,
    WireError,
    as_int,
    dumps,
    json_str,
    messages_prompt,
    parse_json_object,
    sse,
)
from loadkit.sim.wire.kinds import KindFormat

if TYPE_CHECKING:
    import pluggy

    from loadkit.sim.server import SimEngine

Reply = tuple[int, bytes, str]
InfoRoutes = Callable[["SimEngine"], Mapping[tuple[str, str], Callable[[bytes], Reply]]]

__all__ = [
    "GenRoute",
    "InfoRoutes",
    "KindFormat",
    "Outcome",
    "Parser",
    "ProtocolError",
    "Reply",
    "RequestSpec",
    "SimProtocol",
    "StreamFormat",
    "WireError",
    "all_families",
    "as_int",
    "dumps",
    "json_str",
    "messages_prompt",
    "parse_json_object",
    "plugin_protocols",
    "sse",
]


@dataclass(frozen=True)
class SimProtocol:
    """One engine family ``loadkit sim --engine NAME`` can serve.

    ``routes``: generation endpoints, path -> :class:`GenRoute` (how to parse the JSON body
    into a :class:`RequestSpec`, the :class:`StreamFormat` class of the answer, and the
    engine's error body for a status and message). ``info``: given the running engine
    (``engine.model``, ``engine.profile``, ``engine.created``), the other endpoints —
    (method, path) -> handler(request body) -> (status, body, content type) — e.g. a model
    list for ``--engine auto``. ``version`` and ``server_header`` describe the server.
    """

    name: str
    routes: Mapping[str, GenRoute]
    info: InfoRoutes | None = None
    version: str = "0"
    server_header: bytes = b"loadkit-sim"
    description: str = field(default="", compare=False)


class ProtocolError(ValueError, UserError):
    """A plugin registered an unusable protocol; the message names the plugin."""


BUILTIN = "loadkit"  # who provides the built-in families (loadkit.plugins.plugin_name)


@dataclass(frozen=True, slots=True)
class Registered:
    """A registered protocol and the distribution that provides it."""

    protocol: SimProtocol
    plugin: str

    @property
    def builtin(self) -> bool:
        return self.plugin == BUILTIN


def registry(pm: pluggy.PluginManager) -> dict[str, Registered]:
    """Every protocol ``pm``'s plugins register, built-ins first, then in plugin registration
    order; a name registered twice is an error naming the second plugin. Built once per plugin
    manager (rebuilt when its plugin set changes); callers must not mutate the dict."""
    cache = getattr(pm, "cache", None)
    if cache is None:
        return _build_registry(pm)
    if "sim_protocols" not in cache:
        cache["sim_protocols"] = _build_registry(pm)
    found: dict[str, Registered] = cache["sim_protocols"]
    return found


def _build_registry(pm: pluggy.PluginManager) -> dict[str, Registered]:
    from loadkit.plugins import plugin_name

    by_plugin: dict[int, list[Registered]] = {}

    def register(protocol: SimProtocol) -> None:
        plugin = getattr(pm, "calling", None)  # set by GuardedPluginManager around each implementation
        who = plugin_name(pm, plugin)
        if not isinstance(protocol, SimProtocol) or not protocol.name or not protocol.routes:
            raise ProtocolError(f"plugin {who!r} registered {protocol!r}, not a SimProtocol with routes")
        by_plugin.setdefault(id(plugin), []).append(Registered(protocol, who))

    pm.hook.loadkit_register_sim_protocols(register=register)
    # pluggy calls the newest plugin first; the registry follows registration order, so the
    # built-ins come first and a plugin that takes one of their names is the one named.
    found: dict[str, Registered] = {}
    for impl in pm.hook.loadkit_register_sim_protocols.get_hookimpls():
        for entry in by_plugin.get(id(impl.plugin), []):
            if entry.protocol.name in found:
                raise ProtocolError(
                    f"plugin {entry.plugin!r}: simulator protocol {entry.protocol.name!r} already exists"
                )
            found[entry.protocol.name] = entry
    return found


def collect(pm: pluggy.PluginManager, providers: dict[str, str] | None = None) -> dict[str, SimProtocol]:
    """Every plugin (not built-in) protocol by name; a name taken by a built-in family or twice
    is an error. ``providers``, when given, receives each protocol's distribution name."""
    found: dict[str, SimProtocol] = {}
    for name, entry in registry(pm).items():
        if not entry.builtin:
            found[name] = entry.protocol
            if providers is not None:
                providers[name] = entry.plugin
    return found


def _installed() -> dict[str, Registered]:
    from loadkit.plugins import get_plugin_manager

    return registry(get_plugin_manager())


@lru_cache(maxsize=1)
def builtin_protocols() -> dict[str, SimProtocol]:
    """The built-in families' protocols, by name (registered by ``loadkit.sim.builtin``)."""
    return {name: entry.protocol for name, entry in _installed().items() if entry.builtin}


@lru_cache(maxsize=1)
def plugin_protocols() -> dict[str, SimProtocol]:
    """The installed plugins' protocols (cached per process; LOADKIT_LOAD_PLUGINS applies)."""
    return {name: entry.protocol for name, entry in _installed().items() if not entry.builtin}


def listing(pm: pluggy.PluginManager) -> list[dict[str, object]]:
    """What ``loadkit sim --engine`` can serve with ``pm``'s plugins, for ``loadkit plugins``:
    the built-in families, then the plugins' protocols, each with who provides it."""
    from loadkit import __version__

    versions = {dist.project_name: dist.version for _, dist in pm.list_plugin_distinfo()}
    found = registry(pm)
    builtins = [name for name, entry in found.items() if entry.builtin]
    return [
        {
            "protocol": name,
            "plugin": found[name].plugin,
            "version": __version__ if found[name].builtin else versions.get(found[name].plugin, "unknown"),
            "description": found[name].protocol.description,
            "routes": [_route_path(name, path) for path in found[name].protocol.routes],
        }
        for name in [*builtins, *sorted(set(found) - set(builtins))]
    ]


def _route_path(family: str, path: str) -> str:
    # Triton's routes carry the model name (loadkit.sim.families.match_route).
    return f"/v2/models/<model>/{path}" if family == "triton" and not path.startswith("/") else path


def get_protocol(name: str) -> SimProtocol | None:
    """The protocol ``loadkit sim --engine NAME`` serves, built-in or a plugin's (None: unknown)."""
    return builtin_protocols().get(name) or plugin_protocols().get(name)


def require(name: str) -> SimProtocol:
    protocol = get_protocol(name)
    if protocol is None:
        raise KeyError(f"unknown simulator engine family {name!r}")
    return protocol


def routes_of(family: str) -> dict[str, GenRoute]:
    """A family's generation routes (KeyError: no such family)."""
    return dict(require(family).routes)


def find_route(family: str, path: str) -> GenRoute | None:
    """The generation route of a family for a path (Triton's carry the model name)."""
    return match_route(family, require(family).routes, path)


def all_families() -> tuple[str, ...]:
    """Built-in families first, then the plugins'."""
    return tuple(builtin_protocols()) + tuple(sorted(plugin_protocols()))
