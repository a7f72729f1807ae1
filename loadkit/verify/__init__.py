"""``loadkit verify REPORT_DIR``: an independent oracle over a run's raw logs.

From the raw logs (``requests*.jsonl``, written with ``--raw-log``), the manifest and the
report alone, recompute the figures of ``report.json`` and compare each: counts exactly,
percentiles within the histogram's resolution (docs/reports.md, "loadkit verify").

This package must not import ``loadkit.stats`` (nor anything that imports it): it is a second,
separate implementation of the definitions in docs/metrics.md, so a bug in the stats path
shows up as a disagreement instead of being copied into the check. A test imports it in a
fresh interpreter and asserts that no ``loadkit.stats`` module was loaded.
"""

from __future__ import annotations

from loadkit.verify.checks import verify_run
from loadkit.verify.compare import Disagreement, Verdict
from loadkit.verify.rawlog import Run, VerifyInputError, load_run

__all__ = ["Disagreement", "Run", "Verdict", "VerifyInputError", "load_run", "verify_run"]
