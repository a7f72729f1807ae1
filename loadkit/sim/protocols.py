"""Wire protocols plugins add to ``loadkit sim`` (hook ``loadkit_register_sim_protocols``).

A protocol says how to read a generation request and how to frame its answer; the simulator
supplies the rest — continuous batching, the prefix cache, preemption, faults, the truth log —
exactly as for the built-in families. Everything a protocol author needs is importable from
here::

    from loadkit.sim.protocols import GenRoute, Outcome, RequestSpec, SimProtocol, StreamFormat

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

from loadkit.sim.families import FAMILIES, GenRoute, Parser
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

if TYPE_CHECKING:
    import pluggy

    from loadkit.sim.server import SimEngine

Reply = tuple[int, bytes, str]
InfoRoutes = Callable[["SimEngine"], Mapping[tuple[str, str], Callable[[bytes], Reply]]]

__all__ = [
    "GenRoute",
    "InfoRoutes",
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


class ProtocolError(ValueError):
    """A plugin registered an unusable protocol; the message names the plugin."""


def collect(pm: pluggy.PluginManager, providers: dict[str, str] | None = None) -> dict[str, SimProtocol]:
    """Every plugin protocol by name; a name taken by a built-in family or twice is an error.
    ``providers``, when given, receives each protocol's distribution name."""
    from loadkit.plugins import plugin_name

    found: dict[str, SimProtocol] = {}

    def register(protocol: SimProtocol) -> None:
        # GuardedPluginManager says which plugin's implementation is running.
        who = plugin_name(pm, getattr(pm, "calling", None))
        if not isinstance(protocol, SimProtocol) or not protocol.name or not protocol.routes:
            raise ProtocolError(f"plugin {who!r} registered {protocol!r}, not a SimProtocol with routes")
        if protocol.name in FAMILIES or protocol.name in found:
            raise ProtocolError(f"plugin {who!r}: simulator protocol {protocol.name!r} already exists")
        found[protocol.name] = protocol
        if providers is not None:
            providers[protocol.name] = who

    pm.hook.loadkit_register_sim_protocols(register=register)
    return found


@lru_cache(maxsize=1)
def plugin_protocols() -> dict[str, SimProtocol]:
    """The installed plugins' protocols (cached per process; LOADKIT_LOAD_PLUGINS applies)."""
    from loadkit.plugins import get_plugin_manager

    return collect(get_plugin_manager())


def listing(pm: pluggy.PluginManager) -> list[dict[str, object]]:
    """What ``loadkit sim --engine`` can serve with ``pm``'s plugins, for ``loadkit plugins``:
    the built-in families, then the plugins' protocols, each with who provides it."""
    from loadkit import __version__
    from loadkit.sim.families import DESCRIPTIONS, ROUTES

    providers: dict[str, str] = {}
    found = collect(pm, providers)
    versions = {dist.project_name: dist.version for _, dist in pm.list_plugin_distinfo()}
    rows: list[dict[str, object]] = [
        {
            "protocol": name,
            "plugin": "loadkit",
            "version": __version__,
            "description": DESCRIPTIONS.get(name, ""),
            "routes": [_route_path(name, path) for path in routes],
        }
        for name, routes in ROUTES.items()
    ]
    for name in sorted(found):
        who = providers[name]
        rows.append(
            {
                "protocol": name,
                "plugin": who,
                "version": versions.get(who, "unknown"),
                "description": found[name].description,
                "routes": list(found[name].routes),
            }
        )
    return rows


def _route_path(family: str, path: str) -> str:
    # Triton's routes carry the model name (loadkit.sim.families.find_route).
    return f"/v2/models/<model>/{path}" if family == "triton" and not path.startswith("/") else path


def get_protocol(name: str) -> SimProtocol | None:
    return None if name in FAMILIES else plugin_protocols().get(name)


def all_families() -> tuple[str, ...]:
    """Built-in families first, then the plugins'."""
    return FAMILIES + tuple(sorted(plugin_protocols()))


def info_routes(engine: SimEngine) -> dict[tuple[str, str], Callable[[bytes], Reply]]:
    protocol = get_protocol(engine.family)
    if protocol is None or protocol.info is None:
        return {}
    return dict(protocol.info(engine))
