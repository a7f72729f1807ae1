"""The report's HTML helpers: they live in ``loadkit/htmlparts.py``, one layer down, because
``loadkit.capacity`` draws its section with them too; re-exported here for the report's modules."""

from loadkit.htmlparts import (
    NOT_MEASURED,
    environment,
    macro,
    not_measured,
    note,
    num,
    pct,
    render,
    section,
    table,
)

__all__ = [
    "NOT_MEASURED",
    "environment",
    "macro",
    "not_measured",
    "note",
    "num",
    "pct",
    "render",
    "section",
    "table",
]
