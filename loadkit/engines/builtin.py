"""The built-in engines, registered through exactly the hooks a third-party plugin uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadkit.engines.base import EngineAdapter
from loadkit.engines.openai import OpenAIAdapter
from loadkit.hookspecs import hookimpl


def builtin_adapters() -> list[type[EngineAdapter]]:
    return [OpenAIAdapter]


@hookimpl
def loadkit_register_engines(register: Callable[[type[EngineAdapter]], None]) -> None:
    for adapter in builtin_adapters():
        register(adapter)


@hookimpl(trylast=True)
def loadkit_detect_engine(probes: dict[str, Any]) -> str | None:
    # The generic OpenAI API is what every server not recognised by name is assumed to speak.
    return "openai"
