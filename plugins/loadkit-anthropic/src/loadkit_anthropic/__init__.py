"""loadkit-anthropic: the Anthropic Messages API as a loadkit engine.

loadkit finds this module through the entry point in group ``loadkit`` and registers the
hook implementations below with its plugin manager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadkit import EngineAdapter, hookimpl
from loadkit_anthropic.adapter import AnthropicAdapter, MessagesStreamParser, looks_like_anthropic

__version__ = "0.1.0"
__all__ = ["AnthropicAdapter", "MessagesStreamParser", "loadkit_detect_engine", "loadkit_register_engines"]


@hookimpl
def loadkit_register_engines(register: Callable[[type[EngineAdapter]], None]) -> None:
    register(AnthropicAdapter)


@hookimpl
def loadkit_detect_engine(probes: dict[str, Any]) -> str | None:
    return "anthropic" if looks_like_anthropic(probes) else None
