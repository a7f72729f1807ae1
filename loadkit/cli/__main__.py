"""`python -m loadkit.cli ...` is the `loadkit` command."""

import sys

from loadkit.cli.dispatch import main

sys.exit(main())
