"""Deprecated: this module moved to ``loadkit.client.sse`` in loadkit 0.2.0. Kept here, re-exporting its
public names with a ``DeprecationWarning``, until 0.3.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.client.sse import NDJSONDecoder, SSEDecoder, SSEEvent

__all__ = ["NDJSONDecoder", "SSEDecoder", "SSEEvent"]

warn_moved(__name__, "loadkit.client.sse", removed_in="0.3.0")
