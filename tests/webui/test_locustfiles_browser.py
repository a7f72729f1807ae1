"""The example locustfiles (docs/locustfiles.md) in Locust's web UI, in a real browser: started
from the form, the LLM tab shows rows per user class and per label, agreeing with
/loadkit/stats.json; stopped from the UI, the numbers settle, conservation holds and the HTML
report has the per-class table."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, stop_process, wait_for, web_ready
from tests.webui.browser import CHROMIUM, CHROMIUM_ARGS, REPO, shot, sync_playwright_or_skip, table_rows

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

EXAMPLES = {
    "rag": {"RAG": {"rag:answer", "rag:summary"}},
    "agent": {"Agent": {"agent:turn1", "agent:after_search", "agent:after_calculator", "agent:after_models"}},
    "mixed": {"Chat": {"chat:short", "chat:long"}, "Agent": {"turn1", "turnN", "after_tool"}},
}


def start_from_form(page: Any, base: str, host: str) -> None:
    page.goto(base + "/", timeout=15_000)
    page.wait_for_selector("input[name=userCount]", timeout=15_000)
    page.fill("input[name=userCount]", "6")
    page.fill("input[name=spawnRate]", "6")
    page.fill("input[name=host]", host)
    page.get_by_role("button", name="Start").click()


def class_rows(page: Any, classes: dict[str, set[str]]) -> list[dict[str, str]] | None:
    """The LLM tab's rows once every class has its total row and at least two label rows."""
    rows = table_rows(page)
    for name in classes:
        mine = [r for r in rows if r.get("User class") == name]
        if not any(r["Label"] == "*" and int(r["Requests"] or 0) > 0 for r in mine):
            return None
        if len({r["Label"] for r in mine} - {"*"}) < 2:
            return None
    return rows


def check_against_json(rows: list[dict[str, str]], doc: dict[str, Any], classes: dict[str, set[str]]) -> None:
    by_key = {(r["user_class"], r["engine"], r["label"]): r for r in doc["rows"]}
    for row in rows:
        data = by_key[(row["User class"], row["Engine"], row["Label"])]
        assert int(row["Requests"]) == data["requests"] and int(row["Failures"]) == data["failures"], row
        if row["User class"] != "*":
            assert row["ITL ms p50 / p90 / p99"] == "- / - / -"  # not kept per class: not measured
    for name, labels in classes.items():
        shown = {r["Label"] for r in rows if r["User class"] == name} - {"*"}
        assert shown <= labels and len(shown) >= 2, (name, shown)
    total = sum(r["requests"] for r in doc["rows"] if r["user_class"] == "*" and r["label"] == "*")
    per_class = sum(r["requests"] for r in doc["rows"] if r["user_class"] != "*" and r["label"] == "*")
    assert total == per_class > 0


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_in_the_web_ui_has_rows_per_class_and_label(tmp_path, example):
    sync_playwright = sync_playwright_or_skip()
    classes = EXAMPLES[example]
    web = free_port()
    base = f"http://127.0.0.1:{web}"
    report_dir = tmp_path / "report"
    with sim_process("--profile", "fast", truth_log=False) as sim, open(tmp_path / "locust.log", "wb") as log:
        cmd = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / f"{example}.py"), "--no-console-table",
               "--web-host", "127.0.0.1", "--web-port", str(web), "--report-dir", str(report_dir), "--raw-log",
               "--stop-timeout", "10"]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            wait_for("Locust's web UI", web_ready(base), 30)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
                    start_from_form(page, base, sim.url)
                    page.get_by_role("tab", name="LLM").click()
                    wait_for("rows per class and label", lambda: class_rows(page, classes), 60)
                    shot(page, f"locustfile-{example}-llm-tab.png")
                    page.get_by_role("button", name="Stop").click()
                    wait_for(
                        "the run to stop",
                        lambda: get_json(base + "/loadkit/stats.json")["state"] == "stopped",
                        60,
                    )
                    # Requests still finishing in --stop-timeout may land after the page's last poll.
                    page.reload()
                    page.get_by_role("tab", name="LLM").click()

                    def settled() -> tuple[list[dict[str, str]], dict[str, Any]] | None:
                        doc = get_json(base + "/loadkit/stats.json")
                        shown = class_rows(page, classes)
                        try:
                            check_against_json(shown or [], doc, classes)
                        except (AssertionError, KeyError, ValueError):
                            return None
                        return (shown, doc) if shown and doc["conservation"]["holds"] else None

                    shown, doc = wait_for("the LLM table to show the final numbers", settled, 45)
                    assert (
                        doc["conservation"]["scheduled"]
                        == doc["conservation"]["sent"] + doc["conservation"]["dropped"]
                    )
                    shot(page, f"locustfile-{example}-llm-tab-stopped.png")
                    resp = wait_for("the final report", lambda: (r := page.request.get(base + "/loadkit/report",
                                    timeout=60_000)).status == 200 and r, 60)  # fmt: skip
                    html = resp.text()
                    assert "Per user class" in html and all(f"<td>{name}</td>" in html for name in classes)
                finally:
                    browser.close()
        finally:
            stop_process(proc)
