"""Errors a user can fix, raised by library code and turned into one line by the CLI.

``UserError`` is the one base of every such error: the ``loadkit`` command catches it (one
line on stderr, exit code 2), and so do the run's start checks, without a tuple of types.
The subclasses live beside the code that raises them (``ConfigError`` in the run set-up and
the simulator, ``TargetError``, ``PluginError``, ``ProtocolError``, ``ScenarioError``,
``CapacityError`` ...; the table in docs/api/public.md), each keeping its older base (ValueError,
RuntimeError) so existing ``except`` clauses still catch it. tests/test_errors.py holds every
exception class of the package to this, or lists why not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


def run_command(name: str, entry: Callable[[list[str]], int | None], argv: list[str]) -> int:
    """Run one command's ``entry(argv)`` with the endings every ``loadkit`` command shares: a
    user's error as one line naming the command and exit code 2, Ctrl-C as 130."""
    try:
        return int(entry(argv) or 0)
    except UserError as exc:
        print(f"loadkit {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
