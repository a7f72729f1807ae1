"""`python -m loadkit ...` is the `loadkit` command."""

import sys

from loadkit.cli import main

sys.exit(main())
