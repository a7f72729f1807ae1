"""loadkit: a Locust-based load generator for LLM inference servers."""

from loadkit.engines.base import AdapterOptions, EngineAdapter, StreamParser
from loadkit.hookspecs import hookimpl
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage

__version__ = "0.1.0"

__all__ = [
    "AdapterOptions",
    "EngineAdapter",
    "GenerationRequest",
    "HttpRequest",
    "MalformedEvent",
    "StreamParser",
    "TokenEvent",
    "Usage",
    "__version__",
    "hookimpl",
]
