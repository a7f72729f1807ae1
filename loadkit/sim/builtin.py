"""The simulator's built-in engine families, registered through exactly the hook a third-party
plugin uses (``loadkit_register_sim_protocols``), as ``loadkit.engines.builtin`` registers the
built-in engines. It is one of ``loadkit.plugins.BUILTIN_PLUGINS``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from loadkit.hookspecs import hookimpl

if TYPE_CHECKING:
    from loadkit.sim.protocols import SimProtocol


def builtin_protocols() -> list[SimProtocol]:
    """One protocol per built-in family, in the order ``loadkit sim`` lists them."""
    # Imported here: every Locust node builds a plugin manager (for its engines) and imports
    # this module, but only a simulator process asks for its protocols.
    from loadkit.sim.endpoints import INFO, VERSIONS
    from loadkit.sim.families import DESCRIPTIONS, ROUTES, SERVER_HEADER
    from loadkit.sim.protocols import SimProtocol

    return [
        SimProtocol(
            name,
            routes,
            info=INFO[name],
            version=VERSIONS[name],
            server_header=SERVER_HEADER.get(name, b"loadkit-sim"),
            description=DESCRIPTIONS[name],
        )
        for name, routes in ROUTES.items()
    ]


@hookimpl
def loadkit_register_sim_protocols(register: Callable[[SimProtocol], None]) -> None:
    for protocol in builtin_protocols():
        register(protocol)
