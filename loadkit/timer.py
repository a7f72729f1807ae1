"""Deprecated: this module moved to ``loadkit.client.timer`` in loadkit 0.2.0. Kept here, re-exporting its
public names with a ``DeprecationWarning``, until 0.3.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.client.timer import (
    MAX_ERROR_BODY,
    StreamRun,
    Timeouts,
    new_record,
    new_request_id,
    retry_after_seconds,
    run_request,
)

__all__ = [
    "MAX_ERROR_BODY",
    "StreamRun",
    "Timeouts",
    "new_record",
    "new_request_id",
    "retry_after_seconds",
    "run_request",
]

warn_moved(__name__, "loadkit.client.timer", removed_in="0.3.0")
