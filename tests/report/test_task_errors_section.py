"""report.html's Task errors: the header line and the section (per class and kind, the first
traceback, escaped and redacted), "none raised" apart from "not recorded" (older reports)."""

from __future__ import annotations

import re

from loadkit.report import build_html
from tests.report.conftest import make_rows, report_from_rows

TRACEBACK = ('Traceback (most recent call last):\n  File "/x/agent.py", line 12, in episode\n'
             '    call(api_key="sk-abcdefgh123")\n<script>alert(1)</script>: no tool\n')  # fmt: skip
ERRORS = {"Agent": {"count": 5, "other": 1, "errors": [
    {"type": "ValueError", "message": "<script>alert(1)</script>: no tool", "count": 3, "first_unix": 1_700_000_000.0,
     "where": "agent.py:12 in episode", "traceback": TRACEBACK},
    {"type": "KeyError", "message": "'tool'", "count": 1, "first_unix": 1_700_000_001.0, "where": "agent.py:14 in episode",
     "traceback": "Traceback ...\nKeyError: 'tool'\n"}]}}  # fmt: skip


def section_of(html: str) -> str:
    return html.split('<section id="task-errors">')[1].split("</section>")[0]


def test_the_header_and_the_section_show_each_kind_with_its_first_traceback():
    html = build_html(report_from_rows({"a": make_rows("a", 30, 1)}, task_errors=ERRORS), None)
    header = html.split("</header>")[0]
    assert (
        "Task errors:</b> 5 exceptions were raised in the locustfile&#39;s tasks (Agent: ValueError ×3, "
        in header
    )
    assert 'href="#task-errors"' in header
    part = section_of(html)
    rows = re.findall(r"<tr>(.*?)</tr>", part.split("<tbody>")[1].split("</tbody>")[0])
    cells = [re.findall(r"<td>(.*?)</td>", r) for r in rows]
    assert cells[0] == ["Agent", "ValueError", "&lt;script&gt;alert(1)&lt;/script&gt;: no tool", "3",
                        "2023-11-14 22:13:20", "agent.py:12 in episode"]  # fmt: skip
    assert cells[1][:4] == ["Agent", "KeyError", "&#39;tool&#39;", "1"]
    assert cells[2][:4] == ["Agent", "(other kinds)", "kinds past the per-process limit", "1"]
    assert "<script>" not in html
    assert "Agent: ValueError: first traceback" in part and "line 12, in episode" in part
    assert "sk-abcdefgh123" not in html  # a secret in a traceback's source line is masked


def test_none_raised_is_said_and_an_older_report_is_not_measured():
    none = build_html(report_from_rows({"a": make_rows("a", 30, 1)}), None)
    assert "No exception was raised in the locustfile" in section_of(none)
    assert "Task errors:</b>" not in none
    older = report_from_rows({"a": make_rows("a", 30, 1)})
    del older["task_errors"]
    assert 'data-missing="task-errors"' in section_of(build_html(older, None))
