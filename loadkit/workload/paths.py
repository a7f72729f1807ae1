"""Where scenarios and their data live: shipped (package data) or the user's own files.

Shipped scenarios are the repository's ``scenarios/*.toml`` (packaged into the wheel as
``loadkit/scenarios/``, see loadkit/workload/shipped.py) and the traces they replay are package
data ``loadkit/data/traces/...``, so a clone and an installed wheel see the same files. In a scenario's file paths:

- ``${LOADKIT_PACKAGE_DATA}`` is always this installation's ``loadkit/data`` (what shipped
  scenarios use, so a copy of one still finds its trace wherever it is saved);
- ``${LOADKIT_DATA}`` is the environment variable when set (the user's own traces), else the
  packaged data as well;
- other environment variables and ``~`` are expanded; relative paths are relative to the
  scenario file's directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from loadkit.workload.errors import Ctx

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "data"


def default_data_dir() -> Path:
    env = os.environ.get("LOADKIT_DATA")
    return Path(env) if env else PACKAGE_DATA


def expand(raw: str) -> str:
    """The path text with ${LOADKIT_PACKAGE_DATA}, ${LOADKIT_DATA}, other variables and ~ expanded."""
    text = raw.replace("${LOADKIT_PACKAGE_DATA}", str(PACKAGE_DATA))
    text = text.replace("${LOADKIT_DATA}", str(default_data_dir()))
    return os.path.expanduser(os.path.expandvars(text))


def resolve_path(ctx: Ctx, raw: str, base_dir: Path) -> Path:
    """Expand the variables, then resolve relative to the scenario's directory; the file must exist."""
    path = Path(expand(raw))
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise ctx.error(
            f"expected an existing file, {raw!r} resolves to {str(path)!r} which does not exist{_hint(raw)}"
        )
    return path


def _hint(raw: str) -> str:
    if "${LOADKIT_DATA}" not in raw:
        return ""
    env = os.environ.get("LOADKIT_DATA")
    if env:
        return (
            f" (LOADKIT_DATA is set to {env!r}: point it at the directory holding traces/, "
            "or unset it to use the traces shipped with loadkit)"
        )
    return " (set LOADKIT_DATA to the directory holding traces/)"
