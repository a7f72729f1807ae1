"""ScenarioError and the small validation helpers every part of the schema uses.

Every message names the file, the key path (``parts[1].input.mean``) and what was expected,
so `loadkit scenarios validate` can print one line a user can act on.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from loadkit.errors import UserError


class ScenarioError(ValueError, UserError):
    """A scenario file is invalid; str() is one line naming file, key path and expectation."""


class Ctx:
    """Where we are in the file: its name and the key path, for error messages."""

    __slots__ = ("file", "path")

    def __init__(self, file: str, path: str = "") -> None:
        self.file = file
        self.path = path

    def at(self, key: str | int) -> Ctx:
        if isinstance(key, int):
            return Ctx(self.file, f"{self.path}[{key}]")
        return Ctx(self.file, f"{self.path}.{key}" if self.path else key)

    def error(self, expectation: str) -> ScenarioError:
        where = self.path or "(top level)"
        return ScenarioError(f"{self.file}: {where}: {expectation}")


def describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_keys(ctx: Ctx, table: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Unknown keys are errors: a typo silently ignored would change the traffic."""
    allowed = list(allowed)
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; allowed: {', '.join(sorted(allowed))}"
            raise ctx.at(str(key)).error(f"unknown key{hint}")


def check_unique_names(ctx: Ctx, names: list[str], what: str) -> None:
    """Entry i of a list of tables names itself ``names[i]``: refuse a name used twice, at its entry."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ctx.at(i).at("name").error(f"expected unique {what} names, {name!r} is used twice")


def get_table(ctx: Ctx, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.error(f"expected a table, got {describe(value)}")
    return value


def get_list(ctx: Ctx, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ctx.error(f"expected an array, got {describe(value)}")
    return value


def get_str(ctx: Ctx, value: Any, choices: Iterable[str] | None = None) -> str:
    if not isinstance(value, str):
        raise ctx.error(f"expected a string, got {describe(value)}")
    if choices is not None:
        options = list(choices)
        if value not in options:
            raise ctx.error(f"expected one of {', '.join(map(repr, options))}, got {value!r}")
    return value


def get_bool(ctx: Ctx, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ctx.error(f"expected true or false, got {describe(value)}")
    return value


def get_number(
    ctx: Ctx, value: Any, *, low: float | None = None, high: float | None = None, strict_low: bool = False
) -> float:
    """A finite number in [low, high] (or (low, high] when strict_low)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ctx.error(f"expected a finite number, got {describe(value)}")
    if low is not None and (value <= low if strict_low else value < low):
        raise ctx.error(f"expected a number {'>' if strict_low else '>='} {low:g}, got {value!r}")
    if high is not None and value > high:
        raise ctx.error(f"expected a number <= {high:g}, got {value!r}")
    return float(value)


def get_int(ctx: Ctx, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.error(f"expected an integer, got {describe(value)}")
    if low is not None and value < low:
        raise ctx.error(f"expected an integer >= {low}, got {value!r}")
    if high is not None and value > high:
        raise ctx.error(f"expected an integer <= {high}, got {value!r}")
    return value


def require(ctx: Ctx, table: Mapping[str, Any], key: str) -> Any:
    if key not in table:
        raise ctx.at(key).error("required key is missing")
    return table[key]
