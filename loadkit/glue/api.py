"""Deprecated: moved to ``loadkit.locust.api`` in loadkit 0.3.0. Kept here, re-exporting its public names
with a ``DeprecationWarning``, until 0.4.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.locust.api import LLMCalls, register_listeners

__all__ = ["LLMCalls", "register_listeners"]

warn_moved(__name__, "loadkit.locust.api", removed_in="0.4.0")
