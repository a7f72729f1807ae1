"""Deprecated since loadkit 0.2.0, when detection moved into the engines package; it has since
moved again, to ``loadkit.servers.detect`` (issue #33), which this re-exports with a
``DeprecationWarning`` until 0.3.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.servers.detect import (
    MAX_TEXT,
    Detection,
    detect_engine,
    explain,
    probe_paths,
    probe_server,
    probe_summary,
)

__all__ = [
    "Detection",
    "MAX_TEXT",
    "detect_engine",
    "explain",
    "probe_paths",
    "probe_server",
    "probe_summary",
]

warn_moved(__name__, "loadkit.servers.detect", removed_in="0.3.0")
