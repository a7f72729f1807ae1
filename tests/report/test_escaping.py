"""Hostile text from the run (target name, label, the server's error message, scenario name,
stage name, an invalid reason) reaches report.html as text: escaped by the templates, never
markup. Checked with a real HTML parser: no element or attribute the run's text could inject."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import orjson

from loadkit.report import write_html
from tests.report.conftest import delivered_from_rows, make_rows, write_run

EVIL = '<script>alert("x")</script> & \'q\' "dq" <img src=x onerror=alert(1)>'
TARGET, LABEL, STAGE = "t" + EVIL, "lbl" + EVIL, "st" + EVIL
MESSAGE, SCENARIO, REASON = '{"error": "' + EVIL + '"}', "scn" + EVIL + ".toml", "why" + EVIL


class Page(HTMLParser):
    """Every tag and attribute of the page, and its text with entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def hostile_run(tmp_path: Path) -> Path:
    rows = make_rows(TARGET, 200, 1, stages=(STAGE, "high"))
    for r in rows:
        r["label"] = LABEL
    folder = write_run(tmp_path / "run", {TARGET: rows})
    report = orjson.loads((folder / "report.json").read_bytes())
    engine = report["engines"][TARGET]
    engine["labels"] = {LABEL: dict(engine, labels={})}
    for entry in engine["error_messages"].values():
        entry["top"][0]["message"] = MESSAGE
    report["manifest"]["scenario"]["path"] = SCENARIO
    report["delivered"] = delivered_from_rows({TARGET: rows}, report["manifest"]["scenario"]["arrival"])
    report.update(valid=False, invalid_reasons=[REASON])
    (folder / "report.json").write_bytes(orjson.dumps(report))
    return folder


def test_hostile_names_and_messages_are_escaped_in_report_html(tmp_path: Path) -> None:
    html = write_html(hostile_run(tmp_path)).read_text()
    page = Page()
    page.feed(html)
    assert "script" not in page.tags and "img" not in page.tags
    assert not any(name.startswith("on") for name, _ in page.attrs)
    text = "".join(page.text)
    for value in (TARGET, LABEL, MESSAGE, SCENARIO, STAGE, REASON):
        assert value in text, value  # shown, as text, in full
    assert "&lt;script&gt;alert(" in html and "&amp; " in html and "&#39;q&#39;" in html
    # In SVG charts too: the target is a legend entry and a tooltip.
    charts = html.split("<svg", 1)[1]
    assert '<text x="' in charts and "t&lt;script&gt;" in charts
