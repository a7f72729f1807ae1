"""The HTML building blocks of report.html, the live page and the capacity section.

The HTML comes from Jinja2 templates shipped in ``loadkit/report/templates`` with
autoescape on: values are passed as text and escaped by Jinja; markup is only what a template
(or a macro of ``parts.html.j2``, or the SVG chart code) made. Number formatting lives here.

A top-level module that imports nothing of loadkit (the templates are found by package name):
the report, the web UI and ``loadkit.capacity`` all draw with it, and ``report/htmlutil.py``
re-exports it for the report's modules."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

NOT_MEASURED = "—"


@functools.cache
def environment() -> Any:
    """The Jinja2 environment (imported on first use: only the node writing a page needs it)."""
    from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape

    # One environment for report.html and the live page (which shares chart.css).
    loader = ChoiceLoader(
        [PackageLoader("loadkit.report", "templates"), PackageLoader("loadkit.webui", "templates")]
    )
    return Environment(loader=loader,
                       autoescape=select_autoescape(("html", "j2", "svg")),
                       undefined=StrictUndefined)  # a context entry the code forgot fails loudly  # fmt: skip


@functools.cache
def _parts() -> Any:
    return environment().get_template("parts.html.j2").module


def macro(name: str, *args: Any) -> Markup:
    """One macro of parts.html.j2 (``code``, ``bold``, ``verdict``, ``figure`` ...), as Markup."""
    return Markup(getattr(_parts(), name)(*args))


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def num(value: Any, digits: int = 1) -> str:
    """A number for a table cell (text: the template escapes it); None (not measured) is an em dash."""
    if value is None:
        return NOT_MEASURED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def pct(value: float | None, digits: int = 1) -> str:
    return NOT_MEASURED if value is None else f"{100 * value:.{digits}f}%"


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> Markup:
    """A table; head and cells are text (escaped by the template) or Markup from a macro."""
    return macro("table", head, rows, cls)


def section(sec_id: str, title: str, *parts: Any) -> Markup:
    return macro("section", sec_id, title, parts)


def note(text: str) -> Markup:
    return macro("note", text)


def not_measured(what: str, why: str) -> Markup:
    return macro("not_measured", what, why)
