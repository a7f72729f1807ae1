"""Errors a user can fix, raised by library code and turned into one line by the CLI.

``UserError`` is the base the ``loadkit`` command catches (one line on stderr, exit code 2):
library code raises it, or a subclass, without importing the CLI. The other user-facing
errors (``ConfigError``, ``TargetError``, ``PluginError``, ``ScenarioError`` ...) live beside
the code that raises them (the glue, the plugin registry, the workload package).
"""

from __future__ import annotations


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""
