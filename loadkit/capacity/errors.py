"""The one error type of the capacity planner; the CLI turns it into a one-line UserError."""

from __future__ import annotations

from loadkit.errors import UserError


class CapacityError(ValueError, UserError):
    """A bad model config, length file or option, described in one line naming the culprit."""
