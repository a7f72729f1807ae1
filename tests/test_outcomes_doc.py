"""docs/reports.md's table of outcomes names every outcome loadkit.types defines, and nothing
else, and the metric definitions of report.html list them all too."""

from __future__ import annotations

import re
from pathlib import Path

from loadkit import types as t
from loadkit.report.manifest import DEFINITIONS

DOC = Path(__file__).resolve().parents[1] / "docs" / "reports.md"


def test_every_outcome_has_a_row_in_the_docs_table():
    text = DOC.read_text()
    table = text[text.index("## Outcomes of a request") : text.index("## Exit codes of a run")]
    rows = re.findall(r"^\| `([a-z_:<>]+)` \|", table, flags=re.M)
    assert sorted(rows) == sorted([*t.OUTCOMES, f"{t.HTTP_ERROR_PREFIX}<status>"])


def test_report_definitions_list_every_outcome():
    (text,) = [v for k, v in DEFINITIONS if k == "outcomes"]
    assert all(o in text for o in t.OUTCOMES)
