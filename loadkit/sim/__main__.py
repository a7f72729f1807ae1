"""``python -m loadkit.sim`` = ``loadkit sim``."""

import sys

from loadkit.cli import main

sys.exit(main(["sim", *sys.argv[1:]]))
