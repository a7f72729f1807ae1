"""The ``loadkit`` command: the dispatcher (``dispatch``) and the subcommands that drive a
run (``runcmd``: run and demo, ``options_cmd``, ``plugins_cmd``). Other subcommands live
beside the code they drive (``loadkit.report.cli``, ``loadkit.sim.cli`` ...)."""

from loadkit.cli.dispatch import SUBCOMMANDS, main
from loadkit.errors import UserError  # where it lived before loadkit.errors; kept for callers

__all__ = ["SUBCOMMANDS", "UserError", "main"]
