"""The LLM view in a real browser: Debian's chromium via Playwright, against the simulator.

Each test starts the simulator and Locust with its web UI on loopback (local, then master with
two workers), starts a run from the start form, reads the LLM tab from the DOM and compares
it with /loadkit/stats.json, checks the chart page draws, resets from the UI, stops, and
fetches the CSV. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from loadkit.sim.testing import sim_process
from loadkit.webui import view
from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, wait_for, web_ready
from tests.webui.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    SCENARIO,
    locust_process,
    shot,
    sync_playwright_or_skip,
    table_rows,
    totals,
    triple,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

RUN_S = 8.0
SECRET = "sk-browser-test-secret"


def start_from_form(page: Any, base: str, host: str) -> None:
    page.goto(base + "/", timeout=15_000)
    page.wait_for_selector("input[name=userCount]", timeout=15_000)
    page.fill("input[name=userCount]", "4")
    page.fill("input[name=spawnRate]", "4")
    page.fill("input[name=host]", host)
    # loadkit's options are in the form's "Custom parameters" section (collapsed at first).
    if not page.is_visible("input[name=scenario]"):
        page.get_by_text("Custom parameters").click()
    page.fill("input[name=scenario]", str(SCENARIO))
    assert page.get_attribute("input[name=apiKey]", "type") == "password"
    assert page.input_value("input[name=apiKey]") == ""
    assert SECRET not in page.content()  # not in the form, nor in the page's template arguments
    shot(page, "webui-start-form.png")
    page.get_by_role("button", name="Start").click()


def open_llm_tab(page: Any, engines: set[str]) -> list[dict[str, str]]:
    page.get_by_role("tab", name="LLM").click()

    def rows_for_every_engine() -> list[dict[str, str]] | None:
        rows = table_rows(page)
        shown = {r.get("Engine") for r in rows if r.get("Label") == "*" and int(r.get("Requests") or 0) > 0}
        return rows if shown == engines else None

    return wait_for(f"LLM rows for {sorted(engines)}", rows_for_every_engine, 45)


def check_rows_agree(rows: list[dict[str, str]], doc: dict[str, Any], exact: bool) -> None:
    """The DOM's numbers against the JSON behind them: equal after a stop, close while running
    (the table refreshes every ~2 s, so it may trail the JSON by a refresh)."""
    by_engine = totals(doc)
    for row in (r for r in rows if r["Label"] == "*" and r["User class"] == "*"):
        data = by_engine[row["Engine"]]
        shown, actual = int(row["Requests"]), data["requests"]
        if exact:
            assert shown == actual and int(row["Failures"]) == data["failures"]
        else:
            assert 0 < shown <= actual <= shown + max(20, actual // 2), (row, actual)
        for title, metric in ((view.TTFT_TITLE, "ttft_ms"), ("TPOT ms p50 / p90 / p99", "tpot_ms"),
                              ("E2E ms p50 / p90 / p99", "e2e_ms")):  # fmt: skip
            p50 = triple(row[title])[0]
            want = data[f"{metric}_p50"]
            assert p50 is not None and want is not None
            assert p50 == pytest.approx(want, abs=0.051) if exact else p50 == pytest.approx(want, rel=0.3), (
                row, metric, want)  # fmt: skip
        tokps = float(row["Output tok/s"])
        assert tokps == pytest.approx(
            data["output_tokens_per_s"], abs=0.051 if exact else None, rel=None if exact else 0.3
        )


def check_charts(context: Any, base: str, name: str) -> None:
    charts = context.new_page()
    charts.goto(base + "/loadkit/", timeout=15_000)
    for chart in ("ttft", "tpot", "tokps", "inflight"):
        wait_for(f"a drawn line in chart {chart}",
                 lambda chart=chart: charts.locator(f"svg#{chart} path.series").count() > 0, 10)  # fmt: skip
    queue = get_json(base + "/loadkit/stats.json")["queue"]
    if any(v is not None for q in queue.values() for v in q["waiting"]):  # server metrics scraped
        wait_for(
            "the server queue line",
            lambda: charts.locator("svg#inflight path[stroke-dasharray]").count() > 0,
            10,
        )
    d = charts.locator("svg#ttft path.series").first.get_attribute("d") or ""
    assert d.startswith("M") and "L" in d  # a line through several points, not a dot
    shot(charts, name)
    charts.close()


def reset_from_ui(page: Any, base: str, before: dict[str, Any]) -> None:
    """Click Locust's reset; loadkit's counts must fall back (master and every worker)."""
    count_before = sum(r["requests"] for r in totals(before).values())
    epochs = {w["client_id"]: w["epoch"] for w in before["workers"]["nodes"]}
    page.get_by_role("button", name="Reset").click()

    def dropped() -> dict[str, Any] | None:
        doc = get_json(base + "/loadkit/stats.json")
        count = sum(r["requests"] for r in totals(doc).values())
        return doc if count < max(5, count_before // 4) else None

    wait_for("loadkit's counts to drop after Reset", dropped, 15, every_s=0.1)
    if epochs:  # every worker must have reset too: its snapshots carry a newer epoch

        def workers_reset() -> bool:
            nodes = get_json(base + "/loadkit/stats.json")["workers"]["nodes"]
            return all(n["epoch"] > epochs.get(n["client_id"], -1) for n in nodes) and len(nodes) == len(
                epochs
            )

        wait_for("every worker to report stats after the reset", workers_reset, 30)


def stop_and_compare(page: Any, base: str) -> dict[str, Any]:
    """Stop from the UI; once the numbers settle (a master waits for the workers' final
    snapshots after it says "stopped") the table must show exactly the JSON's numbers."""
    page.get_by_role("button", name="Stop").click()
    wait_for("the run to stop", lambda: get_json(base + "/loadkit/stats.json")["state"] == "stopped", 60)
    page.get_by_role("tab", name="LLM").click()

    def agreeing() -> dict[str, Any] | None:
        doc = get_json(base + "/loadkit/stats.json")
        if any(n["status"] != "final" for n in doc["workers"]["nodes"]):
            return None
        rows = table_rows(page)
        try:
            check_rows_agree(rows, doc, exact=True)
        except (AssertionError, KeyError, ValueError):
            return None
        return doc if rows else None

    return wait_for("the LLM table to show the final numbers", agreeing, 45)


def html_report_available() -> bool:
    try:
        from loadkit.report import write_html  # noqa: F401
    except ImportError:
        return False
    return True


def check_report_link(page: Any, base: str, finished: bool) -> None:
    """Before a run: 404 with a reason. After: the HTML report, rendered on demand."""
    resp = page.request.get(base + "/loadkit/report", timeout=60_000)
    if finished and resp.status == 404:
        # The master writes the report once every worker's final stats are in: bounded wait.
        wait_for(
            "the final report",
            lambda: page.request.get(base + "/loadkit/report", timeout=60_000).status == 200,
            60,
        )
        resp = page.request.get(base + "/loadkit/report", timeout=60_000)
    if not finished:
        assert resp.status == 404 and "no report yet" in resp.text()
    elif html_report_available():
        assert resp.status == 200 and "<html" in resp.text().lower()[:500], resp.text()[:300]
        assert resp.headers["content-type"].startswith("text/html")
    else:
        assert resp.status == 404 and "not installed" in resp.text()


def check_csv(page: Any, base: str, doc: dict[str, Any]) -> None:
    resp = page.request.get(base + "/loadkit/stats.csv")
    assert resp.ok and "attachment" in resp.headers["content-disposition"]
    rows = {r["engine"]: r for r in csv.DictReader(io.StringIO(resp.text()))
            if r["label"] == "*" and r["user_class"] == "*"}  # fmt: skip
    for engine, data in totals(doc).items():
        assert int(rows[engine]["requests"]) == data["requests"]


def drive(base: str, host: str, engines: set[str], prefix: str) -> None:
    sync_playwright = sync_playwright_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1500, "height": 950})
            page = context.new_page()
            check_report_link(page, base, finished=False)
            start_from_form(page, base, host)
            wait_for("requests to complete", lambda: sum(
                r["requests"] for r in totals(get_json(base + "/loadkit/stats.json")).values()) >= 20, 30)  # fmt: skip
            page.wait_for_timeout(RUN_S * 1000)
            rows = open_llm_tab(page, engines)
            check_rows_agree(rows, get_json(base + "/loadkit/stats.json"), exact=False)
            shot(page, f"{prefix}-llm-tab.png")
            check_charts(context, base, f"{prefix}-charts.png")
            reset_from_ui(page, base, get_json(base + "/loadkit/stats.json"))
            page.wait_for_timeout(3000)
            doc = stop_and_compare(page, base)
            wait_for("Locust's header to say STOPPED", lambda: page.get_by_text("STOPPED").count() > 0, 10)
            shot(page, f"{prefix}-llm-tab-stopped.png")
            check_csv(page, base, doc)
            check_report_link(page, base, finished=True)
        finally:
            browser.close()


def test_llm_view_local(tmp_path):
    web = free_port()
    base = f"http://127.0.0.1:{web}"
    with sim_process("--profile", "fast", truth_log=False) as sim:
        args = ["--web-host", "127.0.0.1", "--web-port", str(web), "--report-dir", str(tmp_path / "report"),
                "--api-key", SECRET]  # fmt: skip
        with locust_process(tmp_path / "locust.log", *args):
            wait_for("Locust's web UI", web_ready(base), 30)
            drive(base, sim.url, {"openai"}, "local")


def test_llm_view_master_with_two_workers(tmp_path):
    web, master_port = free_port(), free_port()
    base = f"http://127.0.0.1:{web}"
    with sim_process(
        "--serve", "openai:0:profile=fast", "--serve", "openai:0:profile=fast", truth_log=False
    ) as sim:
        # vLLM's adapter scrapes the simulator's vLLM-style /metrics: the queue line is drawn too.
        targets = [a for i, url in enumerate(sim.urls) for a in ("--target", f"sim{i}={url},engine=vllm")]
        master_args = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
                       "--expect-workers", "2", "--web-host", "127.0.0.1", "--web-port", str(web),
                       "--report-dir", str(tmp_path / "report"), "--scrape-interval", "1", *targets]  # fmt: skip
        worker_args = ["--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port)]
        with (
            locust_process(tmp_path / "master.log", *master_args),
            locust_process(tmp_path / "worker1.log", *worker_args),
            locust_process(tmp_path / "worker2.log", *worker_args),
        ):
            wait_for("Locust's web UI", web_ready(base), 30)
            wait_for("two workers", lambda: get_json(base + "/stats/requests")["worker_count"] == 2, 30)
            drive(base, sim.urls[0], {"sim0", "sim1"}, "master")
