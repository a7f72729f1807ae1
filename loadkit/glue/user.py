"""Deprecated: moved to ``loadkit.locust.user`` in loadkit 0.3.0. Kept here, re-exporting its public names
with a ``DeprecationWarning``, until 0.4.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.locust.user import LLMUser

__all__ = ["LLMUser"]

warn_moved(__name__, "loadkit.locust.user", removed_in="0.4.0")
