"""One percentile method in every view (issue 31): a real headless run with sweep stages and
multi-turn sessions against the simulator, whose report.html stage, input-length-bucket and
turn tables show exactly report.json's figures (they once interpolated the raw log: turn-4
TTFT p50 139 ms in report.json, 194 ms on the page)."""

from __future__ import annotations

import html
import re

import pytest

from loadkit.report.htmlutil import num
from tests.helpers.runs import check_conservation, load_report
from tests.helpers.simruns import STAGED_SESSIONS, loadkit, sim_run

pytestmark = pytest.mark.integration


def table_rows(page: str, section_id: str) -> list[list[str]]:
    """The body rows of the first table in ``<section id=section_id>``, as cell texts."""
    body = page.split(f'<section id="{section_id}">')[1].split("</section>")[0]
    body = body[body.index("<table") :].split("</table>")[0]
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        ]
        if cells:
            rows.append(cells)
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict, str]:
    folder = sim_run(tmp_path_factory.mktemp("onemethod") / "run", "--sim", "fast=fast",
                     "--scenario", str(STAGED_SESSIONS), seconds=9)  # fmt: skip
    check_conservation(folder)
    proc = loadkit("report", str(folder))
    assert proc.returncode == 0, proc.stderr
    return load_report(folder), (folder / "report.html").read_text()


def test_turn_table_is_report_json(run):
    report, page = run
    turns = report["sessions"]["fast"]["turns"]
    rows = table_rows(page, "turns")
    numbered = {k: v for k, v in turns.items() if k.isdigit()}
    assert len(numbered) >= 2 and len(rows) == len(numbered)
    for row in rows:
        t = turns[row[1]]["ttft_ms"]
        assert row[0] == "fast" and row[2:] == [
            num(t["count"]),
            num(t["p50"]),
            num(t["p90"]),
            num(t["p99"]),
        ], row


def test_stage_table_is_report_json(run):
    report, page = run
    stages = [s for s in report["stages"]["fast"]["stages"] if s["stats"]]
    rows = table_rows(page, "stages")
    assert len(stages) == 2 and len(rows) == 2
    for row, stage in zip(rows, stages, strict=True):
        s = stage["stats"]
        assert row[1] == stage["name"] and row[3:5] == [num(s["requests"]), num(s["ok"])], row
        assert row[8:] == [num(s["ttft_ms"][q]) for q in ("p50", "p90", "p99")] + [
            num(s["tpot_ms"]["p50"])
        ], row


def test_length_bucket_table_is_report_json(run):
    report, page = run
    buckets = report["lengths"]["by_target"]["fast"]["by_input_tokens"]
    rows = table_rows(page, "buckets")
    assert len(buckets) >= 2 and len(rows) == len(buckets)
    for row, b in zip(rows, buckets, strict=True):
        want = [b["bucket"], num(b["requests"]), num(b["ok"]), num(b["ttft_ms"]["p50"]), num(b["ttft_ms"]["p99"]),
                num(b["tpot_ms"]["p50"]), num(b["tpot_ms"]["p99"]), num(b["e2e_ms"]["p50"])]  # fmt: skip
        assert row[1:] == want, row
    # The buckets hold every request with a server prompt count, once.
    engine = report["engines"]["fast"]
    assert sum(b["requests"] for b in buckets) == engine["n_in"]["count"]
    assert sum(b["ok"] for b in buckets) <= engine["ok"]


def test_the_views_agree_with_the_engine_section_exactly(run):
    """A stage's, a bucket's, a turn's figures are of the same ns histograms as the engine's:
    one stage holding every ok request would quote the engine's p50 to the digit."""
    report, _ = run
    engine = report["engines"]["fast"]
    stages = [s["stats"] for s in report["stages"]["fast"]["stages"] if s["stats"]]
    assert sum(s["ok"] for s in stages) == engine["ok"]
    turns = report["sessions"]["fast"]["turns"]
    assert sum(t["ttft_ms"]["count"] for t in turns.values()) == engine["ttft_ms"]["count"]
    buckets = report["lengths"]["by_target"]["fast"]["by_input_tokens"]
    assert sum(b["ok"] for b in buckets) == engine["ok"]  # the simulator counts every prompt
