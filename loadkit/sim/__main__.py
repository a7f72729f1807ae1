"""``python -m loadkit.sim`` = ``loadkit sim``: the simulator's own entry point, with the
dispatcher's endings (a user's error as one line and exit 2, Ctrl-C as 130), without importing
``loadkit.cli``, which sits above the simulator."""

import sys

from loadkit.errors import UserError
from loadkit.sim.cli import main


def _run(argv: list[str]) -> int:
    try:
        return int(main(argv) or 0)
    except UserError as exc:
        print(f"loadkit sim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


sys.exit(_run(sys.argv[1:]))
