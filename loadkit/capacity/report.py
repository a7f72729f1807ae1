"""The hook the run report calls when a run names a model config.

A report must still be written when the capacity part cannot be computed, so this never raises
a CapacityError: it returns the plan (or None) and an HTML section that says what went wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.planner import plan
from loadkit.capacity.render import render_html
from loadkit.stats.rawlog import raw_log_paths


def report_section(
    model: str | Path, report_dir: str | Path, **options: Any
) -> tuple[dict[str, Any] | None, str]:
    """(plan, html) for a finished run: lengths from the run's raw log when it wrote one.

    ``options`` are plan()'s keyword arguments (kv_dtypes, block_sizes, gpu_memory, tp, ...).
    Without a raw log the plan still gives KV per token and the fit in tokens.
    """
    folder = Path(report_dir)
    lengths = folder if raw_log_paths(folder) else None
    try:
        result = plan(model, lengths, **options)
    except CapacityError as exc:
        from loadkit.htmlparts import macro

        return None, str(macro("capacity_failed", f"capacity plan not computed: {exc}"))
    if lengths is None:
        result["warnings"].append("the run wrote no raw log (--raw-log): no length distribution")
    return result, render_html(result)
