"""loadkit-anthropic: the Anthropic Messages API as a loadkit engine.

loadkit finds this module through the entry point in group ``loadkit`` and registers the
hook implementations below with its plugin manager.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from loadkit import EngineAdapter, hookimpl
from loadkit_anthropic.adapter import (
    API_VERSION,
    AnthropicAdapter,
    MessagesStreamParser,
    looks_like_anthropic,
)

__version__ = "0.1.0"
__all__ = [
    "AnthropicAdapter",
    "MessagesStreamParser",
    "loadkit_add_arguments",
    "loadkit_detect_engine",
    "loadkit_register_engines",
    "loadkit_register_sim_protocols",
]


@hookimpl
def loadkit_register_engines(register: Callable[[type[EngineAdapter]], None]) -> None:
    register(AnthropicAdapter)


@hookimpl
def loadkit_detect_engine(probes: dict[str, Any]) -> str | None:
    return "anthropic" if looks_like_anthropic(probes) else None


@hookimpl
def loadkit_add_arguments(group: argparse._ArgumentGroup) -> None:
    # The adapter reads it back as options.option("anthropic_version") (AdapterOptions.run_options).
    group.add_argument(
        "--anthropic-version",
        default=API_VERSION,
        env_var="LOADKIT_ANTHROPIC_VERSION",
        help=f"anthropic-version header sent with every request (default {API_VERSION})",
    )


@hookimpl
def loadkit_register_sim_protocols(register: Callable[[Any], None]) -> None:
    # Imported here: a load test never needs the simulator's modules.
    from loadkit_anthropic.sim import PROTOCOL

    register(PROTOCOL)
