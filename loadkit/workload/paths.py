"""Finding data files named in a scenario: the file's directory, ${LOADKIT_DATA}, shared/ beside the repo.

A shipped scenario says ``path = "${LOADKIT_DATA}/traces/azure-llm-2023/..."``. When
LOADKIT_DATA is unset, it defaults to the first existing of: ``<repo>/../shared/data`` (the
layout of this machine and of CI, where shared/ sits beside the clone) and ``<repo>/data``.
"""

from __future__ import annotations

import os
from pathlib import Path

from loadkit.workload.errors import Ctx

_REPO = Path(__file__).resolve().parents[2]


def default_data_dir() -> Path:
    env = os.environ.get("LOADKIT_DATA")
    if env:
        return Path(env)
    for candidate in (_REPO.parent / "shared" / "data", _REPO / "data"):
        if candidate.is_dir():
            return candidate
    return _REPO.parent / "shared" / "data"


def resolve_path(ctx: Ctx, raw: str, base_dir: Path) -> Path:
    """Expand ${LOADKIT_DATA} (and other env vars, ~), then resolve relative to the scenario's directory."""
    text = raw.replace("${LOADKIT_DATA}", str(default_data_dir()))
    text = os.path.expanduser(os.path.expandvars(text))
    path = Path(text)
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise ctx.error(f"expected an existing file, {raw!r} resolves to {str(path)!r} which does not exist "
                        "(set LOADKIT_DATA to the directory holding traces/)")
    return path
