"""Where a request's tenant priority goes: a body field or a header, per target.

vLLM reads the request body's ``priority`` (with ``--scheduling-policy priority``); gateways in
front of engines often read a header instead. A target says which with ``priority_as``:
``"field:NAME"`` (the body field NAME), ``"header:NAME"`` (the header NAME, the integer as
text) or ``"none"`` (not sent). Without it, the engine adapter's own ``priority_as`` applies
(``"field:priority"`` unless an adapter says otherwise).
"""

from __future__ import annotations

from typing import Any

KINDS = ("field", "header")
DEFAULT = "field:priority"


def check_priority_as(value: str) -> str:
    """The value itself if well formed; ValueError naming what was expected otherwise."""
    if value == "none":
        return value
    kind, sep, name = value.partition(":")
    if not sep or kind not in KINDS or not name.strip() or name != name.strip():
        raise ValueError(f"expected 'field:NAME', 'header:NAME' or 'none', got {value!r}")
    return value


def place_priority(priority: int, how: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    """Put ``priority`` into the request's extra body or its headers, as ``how`` says."""
    kind, _, name = how.partition(":")
    if kind == "field":
        body[name] = priority
    elif kind == "header":
        headers[name] = str(priority)
