"""report.html shows time to first answer token (TTFAT) beside TTFT in its summary, stage,
input-length bucket and turn tables when the run saw reasoning (TTFT is then the first reasoning
token), with report.json's figures; a run without reasoning keeps TTFT alone."""

from __future__ import annotations

from html.parser import HTMLParser
from types import SimpleNamespace as NS
from typing import Any

from loadkit.records import RequestRecord
from loadkit.report.htmlutil import num
from loadkit.report.page import build_html
from loadkit.stats import StatsCollector
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.runcontext import RunContext
from tests.helpers.records import record

PLAN = [{"name": "s1", "level": 4, "level_kind": "users", "duration_s": 10.0}]
TABLES = ("summary", "stages", "buckets", "turns")


class Tables(HTMLParser):
    """The first table of each <section id=...>: a list of rows, each {header: cell text}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, str]]] = {}
        self._section: str | None = None
        self._head: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_table = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self._section = dict(attrs).get("id")
        elif tag == "table" and self._section and self._section not in self.tables:
            self._in_table, self._head = True, []
            self.tables[self._section] = []
        elif self._in_table and tag == "tr":
            self._row = []
        elif self._in_table and tag in ("td", "th"):
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if not self._in_table:
            return
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if not self._head:
                self._head = self._row
            else:
                self.tables[str(self._section)].append(dict(zip(self._head, self._row, strict=True)))
            self._row = None
        elif tag == "table":
            self._in_table = False


def tables_of(report: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    parser = Tables()
    parser.feed(build_html(report))
    return parser.tables


def run_report(records: list[RequestRecord]) -> dict[str, Any]:
    """report.json of these records through the stats a run installs (stats/builtin.py)."""
    c = StatsCollector()
    tenants = [NS(name="acme", priority=None, slos=None, arrival=None)]
    BuiltinSections(c, RunContext(plan=tuple(PLAN), staged=True, tenants=tuple(tenants))).install()
    c.reset()
    for r in records:
        r.stage, r.user_class, r.turn = "s1", "Chat", 1
        c.add(r)
    return c.report()


def thinking(i: int) -> RequestRecord:
    """A reply whose first token is reasoning (10-ish ms) and whose answer starts ~300 ms later."""
    r = record(label="acme/chat", ttft_ms=10.0 + i, gaps_ms=(300.0 + 3 * i, 5.0, 5.0), n_in=700)
    events = r.event_t_ns
    r.t_first_reasoning_ns, r.t_reasoning_end_ns = events[0], events[1]
    r.t_first_answer_ns, r.t_last_answer_ns = events[1], events[-1]
    r.n_reasoning, r.n_answer = 1, 3
    return r


def test_a_reasoning_run_shows_ttfat_beside_ttft_with_report_json_figures():
    report = run_report([thinking(i) for i in range(40)])
    engine = report["engines"]["e"]
    assert engine["ttfrt_ms"]["count"] == 40
    sections = {
        "summary": engine,
        "stages": report["stages"]["e"]["stages"][0]["stats"],
        "buckets": report["lengths"]["by_target"]["e"]["by_input_tokens"][0],
        "turns": report["sessions"]["e"]["turns"]["1"],
    }
    tables = tables_of(report)
    for name, section in sections.items():
        row = tables[name][0]
        heads = list(row)
        assert heads.index("TTFAT p50") == heads.index("TTFT p99") + 1, name
        for p in ("p50", "p90", "p99"):
            if f"TTFAT {p}" in row:
                assert row[f"TTFAT {p}"] == num(section["ttfat_ms"][p]), (name, p)
                # One request set, one histogram type: every view shows the engine's figure.
                assert section["ttfat_ms"][p] == engine["ttfat_ms"][p], (name, p)
        assert float(row["TTFAT p50"].replace(",", "")) > 300 > float(row["TTFT p50"].replace(",", "")), name
    assert {"TTFAT p90"} <= set(tables["summary"][0]) and "TTFAT p90" not in tables["buckets"][0]


def test_a_run_without_reasoning_shows_ttft_alone():
    report = run_report([record(label="acme/chat", ttft_ms=20.0 + i, n_in=700) for i in range(10)])
    tables = tables_of(report)
    for name in TABLES:
        assert tables[name] and "TTFT p50" in tables[name][0], name
        assert not any(h.startswith("TTFAT") for h in tables[name][0]), name


def test_stage_and_turn_wires_without_ttfat_still_merge():
    """A worker that sent no TTFAT histogram merges as empty (its section then has no ttfat_ms)."""
    from loadkit.stats.sessionstats import TurnStats
    from loadkit.stats.stagestats import StageCell

    cell, turn = StageCell(), TurnStats()
    cell.add(thinking(0), None)
    turn.add(thinking(0))
    wire, turn_wire = cell.to_wire(), turn.to_wire()
    assert StageCell.from_wire(wire).summary(None)["ttfat_ms"]["p50"] is not None
    assert TurnStats.from_wire(turn_wire).summary()["ttfat_ms"]["count"] == 1
    del wire["hists"]["ttfat_ms"], turn_wire["ttfat_ns"]
    assert "ttfat_ms" not in StageCell.from_wire(wire).summary(None)
    assert "ttfat_ms" not in TurnStats.from_wire(turn_wire).summary()
