"""The engine adapter contract, at the path plugins import it from.

The classes live in ``loadkit.core.adapter`` (the bottom layer, so that records, client,
plugins and engines all point down to it); this module re-exports them without a warning:
``loadkit.engines.base`` stays a public, stable path (docs/api/public.md).
"""

from loadkit.core.adapter import AdapterOptions, EngineAdapter, Framing, StreamParser
from loadkit.core.kinds import BodyParser, BodyResult, RequestKind

__all__ = [
    "AdapterOptions",
    "BodyParser",
    "BodyResult",
    "EngineAdapter",
    "Framing",
    "RequestKind",
    "StreamParser",
]
