"""Deprecated: this module moved in loadkit 0.2.0 (to ``loadkit.glue.runoptions``;
``loadkit.run.runoptions`` since 0.3.0). Kept here, re-exporting its
public names with a ``DeprecationWarning``, until 0.3.0 (docs/api/public.md)."""

from loadkit._moved import warn_moved
from loadkit.run.runoptions import configure_plugins, run_options

__all__ = ["configure_plugins", "run_options"]

warn_moved(__name__, "loadkit.run.runoptions", removed_in="0.3.0")
