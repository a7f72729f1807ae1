"""The live page's per-kind table in a real browser (Debian's chromium via Playwright): a run
mixing chat, embeddings and rerank against the simulator, started with --autostart; the table
appears with one row per kind, and its cells are stats.json's ``kinds`` rows."""

from __future__ import annotations

from typing import Any

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, wait_for, web_ready
from tests.webui.browser import CHROMIUM, CHROMIUM_ARGS, locust_process, shot, sync_playwright_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

MIX = """schema = "loadkit.scenario/1"
name = "kinds-live"
seed = 5
[[parts]]
name = "emb"
kind = "embeddings"
inputs = { dist = "uniform", low = 2, high = 8 }
input_tokens = 24
[[parts]]
name = "rr"
kind = "rerank"
query_tokens = 8
documents = 6
document_tokens = 30
[[parts]]
name = "chat"
input = 16
output = 8
"""


def kind_cells(page: Any) -> dict[str, list[str]]:
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll("#kinds tbody tr")].map(
            tr => [tr.cells[1].textContent, [...tr.cells].map(td => td.textContent)]))"""
    )


def test_live_page_shows_a_row_per_kind(tmp_path):
    sync_playwright = sync_playwright_or_skip()
    scenario = tmp_path / "kinds.toml"
    scenario.write_text(MIX)
    web = free_port()
    base = f"http://127.0.0.1:{web}"
    with sim_process("--profile", "fast", truth_log=False) as sim:
        args = ["--web-host", "127.0.0.1", "--web-port", str(web), "--report-dir", str(tmp_path / "report"),
                "--host", sim.url, "--scenario", str(scenario), "--autostart", "-u", "3", "-r", "3"]  # fmt: skip
        with locust_process(tmp_path / "locust.log", *args), sync_playwright() as p:
            wait_for("Locust's web UI", web_ready(base), 30)
            wait_for("every kind answered", lambda: len([
                r for r in get_json(base + "/loadkit/stats.json")["kinds"] if r["ok"] >= 3]) == 3, 40)  # fmt: skip
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(base + "/loadkit/", timeout=15_000)
            page.wait_for_selector("#kinds:not([hidden]) tbody tr", timeout=15_000)
            cells = kind_cells(page)
            shot(page, "webui-kinds.png")
            browser.close()
            doc = get_json(base + "/loadkit/stats.json")
    assert set(cells) == {"chat", "embeddings", "rerank"}
    rows = {r["kind"]: r for r in doc["kinds"]}
    for kind, row in cells.items():
        assert row[0] == rows[kind]["target"]
        assert int(row[2]) <= rows[kind]["requests"]  # the page read an earlier poll, never more
    assert cells["chat"][5] == "— / —"  # a chat has no per-item latency
    assert cells["rerank"][9] == "6.00" and cells["chat"][9] == "—"  # rerank batches: 6 documents
