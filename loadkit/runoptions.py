"""Deprecated: this module moved to ``loadkit.glue.runoptions`` in loadkit 0.2.0. Kept here, re-exporting its
public names with a ``DeprecationWarning``, until 0.3.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.glue.runoptions import configure_plugins, run_options

__all__ = ["configure_plugins", "run_options"]

warn_moved(__name__, "loadkit.glue.runoptions", removed_in="0.3.0")
