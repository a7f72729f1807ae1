"""Scenario references: a file path, or the name of a scenario shipped in ``scenarios/``.

A locustfile says ``scenario = "agent-multiturn"`` and ``--scenario`` takes the same: a
shipped scenario is found by its file name, with or without ``.toml``, and with ``-`` or
``_`` (``uneven-chat`` is ``scenarios/uneven_chat.toml``, whose ``name`` is ``uneven-chat``).
Anything that is not a shipped name is a path: as given (relative to the working directory),
else relative to a base directory (the locustfile's), so a locustfile can sit beside its
scenario files.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "scenarios"


class UnknownScenario(ValueError):
    """A reference that is neither an existing file nor a shipped scenario's name."""


def shipped_scenarios() -> dict[str, Path]:
    """Every name a shipped scenario answers to (file stem, and with ``_`` as ``-``) → its file."""
    out: dict[str, Path] = {}
    for path in sorted(SHIPPED_DIR.glob("*.toml")) if SHIPPED_DIR.is_dir() else []:
        out[path.stem] = path
        out[path.stem.replace("_", "-")] = path
    return out


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long: not a file
        return False


def looks_like_name(ref: str) -> bool:
    """A bare name (no directory; ``.toml`` optional): looked up among the shipped scenarios."""
    return bool(ref) and "/" not in ref and "\\" not in ref


def resolve_scenario(ref: str, base_dir: Path | None = None) -> Path:
    """The scenario file ``ref`` names. A path that exists nowhere is returned as given (the
    loader then says it cannot read it); an unknown bare name raises UnknownScenario."""
    path = Path(os.path.expanduser(ref))  # unlike Path.expanduser, never raises for ~unknown
    if _is_file(path):
        return path
    if base_dir is not None and not path.is_absolute() and _is_file(base_dir / path):
        return base_dir / path
    if not looks_like_name(ref):
        return path
    shipped = shipped_scenarios()
    found = shipped.get(ref.removesuffix(".toml"))
    if found is None:
        names = ", ".join(sorted({p.stem.replace("_", "-") for p in shipped.values()})) or "none"
        raise UnknownScenario(f"scenario {ref!r} is neither a file nor a shipped scenario (shipped: {names})")
    return found


def scenario_tags(ref: str, base_dir: Path | None = None) -> set[str]:
    """Tags for the scenario task of a user class sending ``ref``: the reference as a name (its
    stem, ``_`` as ``-`` too), the file's stem and, when the file can be read now, the
    scenario's own ``name``. Best effort: an unreadable file is reported when the run starts, not here."""
    tags = {Path(ref).stem, Path(ref).stem.replace("_", "-")}
    try:
        path = resolve_scenario(ref, base_dir)
        tags.add(path.stem)
        with open(path, "rb") as fh:
            name = tomllib.load(fh).get("name")
    except (OSError, ValueError, UnknownScenario):  # TOMLDecodeError is a ValueError
        return tags
    if isinstance(name, str) and name:
        tags.add(name)
    return tags
