"""The run set-up's one error type for options and locustfiles that cannot start a run."""

from __future__ import annotations

from loadkit.errors import UserError


class ConfigError(UserError):
    """A run cannot start with these options; the message says why, in one line."""
