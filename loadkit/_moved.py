"""The warning a module kept at its old import path gives (docs/api/public.md, "Deprecated
paths"): a moved public module stays importable for one minor release."""

from __future__ import annotations

import warnings


def warn_moved(old: str, new: str, removed_in: str) -> None:
    """Called by the module at ``old`` when it is first imported."""
    # stacklevel 3: past this function and the old module, to the import statement
    # (warnings skips importlib's own frames), so filters and reports name the importer.
    warnings.warn(
        f"{old} has moved to {new}: import from {new} ({old} will be removed in loadkit {removed_in})",
        DeprecationWarning,
        stacklevel=3,
    )
