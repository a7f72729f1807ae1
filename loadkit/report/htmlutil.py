"""Small HTML helpers shared by the report sections: escaping, number cells, tables, sections."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

NOT_MEASURED = "—"


def num(value: Any, digits: int = 1) -> str:
    """A number for a table cell; None (not measured) shows as an em dash."""
    if value is None:
        return NOT_MEASURED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return escape(str(value))


def pct(value: float | None, digits: int = 1) -> str:
    return NOT_MEASURED if value is None else f"{100 * value:.{digits}f}%"


def table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """A table; ``head`` is escaped here, cells must already be HTML (num() or escape())."""
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def section(sec_id: str, title: str, *parts: str) -> str:
    return f'<section id="{escape(sec_id)}"><h2>{escape(title)}</h2>{"".join(parts)}</section>'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def not_measured(what: str, why: str) -> str:
    return f'<p class="nm" data-missing="{escape(what)}">Not measured: {escape(why)}</p>'
