"""The built-in engines, registered through exactly the hooks a third-party plugin uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadkit.core.adapter import EngineAdapter
from loadkit.engines.llamacpp import LlamaCppAdapter
from loadkit.engines.ollama import OllamaAdapter
from loadkit.engines.openai import OpenAIAdapter
from loadkit.engines.sglang import SGLangAdapter
from loadkit.engines.tensorrt import TensorRTLLMAdapter
from loadkit.engines.tgi import TGIAdapter
from loadkit.engines.vllm import VLLMAdapter
from loadkit.hookspecs import hookimpl
from loadkit.servers.detectors import match_rules


def builtin_adapters() -> list[type[EngineAdapter]]:
    return [
        OpenAIAdapter,
        VLLMAdapter,
        SGLangAdapter,
        TGIAdapter,
        TensorRTLLMAdapter,
        LlamaCppAdapter,
        OllamaAdapter,
    ]


@hookimpl
def loadkit_register_engines(register: Callable[[type[EngineAdapter]], None]) -> None:
    for adapter in builtin_adapters():
        register(adapter)


@hookimpl(trylast=True)
def loadkit_detect_engine(probes: dict[str, Any]) -> str | None:
    # trylast: an installed plugin's detector gets the first say. Then the built-in rules;
    # the generic OpenAI API is what every server not recognised by name is assumed to speak.
    match = match_rules(probes)
    return match.engine if match is not None else "openai"
