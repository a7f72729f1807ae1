"""``python -m loadkit.sim`` = ``loadkit sim``: the simulator's own entry point, with the
dispatcher's endings (a user's error as one line and exit 2, Ctrl-C as 130), without importing
``loadkit.cli``, which sits above the simulator."""

import sys

from loadkit.errors import run_command
from loadkit.sim.cli import main

sys.exit(run_command("sim", main, sys.argv[1:]))
