"""Shipped scenarios: the repository's top-level ``scenarios/``, addressed by name from anywhere.

The files live once, in ``scenarios/`` at the repository's root; the build (setup.py) copies them
into the wheel as package data ``loadkit/scenarios/``. So an installed loadkit reads them from
inside the package, and a checkout (an editable install) reads the top-level folder in place.

``--scenario uneven_chat`` (or ``uneven-chat``, or ``uneven_chat.toml``) names a shipped file;
anything that is an existing file is used as that file first, so a path always works and a
local file can shadow a shipped name on purpose.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from loadkit.workload.errors import ScenarioError

PACKAGE = Path(__file__).resolve().parents[1]


def _shipped_dir() -> Path:
    """The installed package's copy when there is one (a wheel), else the checkout's top-level folder
    (a clone or an editable install, where the package sits in the repository beside pyproject.toml)."""
    packaged = PACKAGE / "scenarios"
    checkout = PACKAGE.parent / "scenarios"
    if packaged.is_dir() or not (PACKAGE.parent / "pyproject.toml").is_file():
        return packaged  # an install without its copy lists none, rather than reading site-packages
    return checkout


SHIPPED_DIR = _shipped_dir()


def _key(name: str) -> str:
    return name.lower().replace("-", "_")


def shipped_scenarios() -> dict[str, Path]:
    """{name: file} of every shipped scenario, by file stem, sorted."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("*.toml"))}


def find_scenario(text: str | Path) -> Path:
    """The scenario file `text` names: an existing file or a path with a directory as given (reading
    it reports what is wrong), else a shipped scenario's name; ScenarioError for an unknown name."""
    path = Path(text)
    if path.is_file() or path.parent != Path(".") or not path.name:
        return path
    shipped = shipped_scenarios()
    by_key = {_key(name): p for name, p in shipped.items()}
    key = _key(path.name.removesuffix(".toml"))
    if key in by_key:
        return by_key[key]
    close = difflib.get_close_matches(key, list(by_key), n=1)
    hint = f"did you mean {_name_of(close[0], shipped)!r}? " if close else ""
    raise ScenarioError(
        f"{text}: no such file, and no shipped scenario of that name ({hint}shipped: "
        f"{', '.join(shipped) or 'none'}; `loadkit scenarios list` describes them)"
    )


def _name_of(key: str, shipped: dict[str, Path]) -> str:
    return next(name for name in shipped if _key(name) == key)


def describe_shipped() -> list[tuple[str, str, str]]:
    """(name, traffic kind, description) per shipped scenario, read without building the workload."""
    rows = []
    for name, path in shipped_scenarios().items():
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        rows.append((name, _kind(raw), str(raw.get("description", ""))))
    return rows


def _kind(raw: dict[str, Any]) -> str:
    """e.g. "requests, open loop (poisson)", "mooncake trace replay, open loop", "sessions, closed loop"."""
    arrival = raw.get("arrival", {}).get("model", "closed")
    load = (
        "closed loop"
        if arrival == "closed"
        else "open loop"
        if arrival == "trace"
        else f"open loop ({arrival})"
    )
    if "trace" in raw:
        trace = raw["trace"]
        what = f"{trace.get('format', '?')} trace {'as sessions' if trace.get('as_sessions') else 'replay'}"
    elif "rag" in raw:
        what = "RAG sessions (embeddings, rerank, chat)"
    else:
        what = "sessions" if "sessions" in raw else "requests"
        kinds = sorted({str(p.get("kind", "chat")) for p in raw.get("parts", [])} - {"chat"})
        if kinds:
            what += f" ({', '.join(kinds)})"
    return f"{what}, {load}"


class UnknownScenario(ScenarioError):
    """A reference that is neither an existing file nor a shipped scenario's name."""


def resolve_scenario(ref: str | Path, base_dir: Path | None = None) -> Path:
    """The scenario file a user class's ``scenario`` (or ``--scenario``) names: an existing file
    as given, else relative to ``base_dir`` (the locustfile's directory, so a locustfile can sit
    beside its scenarios), else a shipped name (find_scenario); UnknownScenario for an unknown name."""
    path = Path(ref)
    if base_dir is not None and not path.is_absolute() and not _is_file(path) and _is_file(base_dir / path):
        return base_dir / path
    try:
        return find_scenario(ref)
    except ScenarioError as exc:
        raise UnknownScenario(str(exc)) from None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long: not a file
        return False


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
    except (OSError, ValueError, ScenarioError):  # TOMLDecodeError is a ValueError
        return tags
    if isinstance(name, str) and name:
        tags.add(name)
    return tags
