"""A run started from the web UI's form against an https:// target: the TLS options are in the
form, the CA bundle typed there is the one the run trusts, and every request is ok."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.certs import make_tls_files
from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, wait_for, web_ready
from tests.webui.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    SCENARIO,
    locust_process,
    shot,
    sync_playwright_or_skip,
    totals,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]


def test_start_form_runs_against_a_tls_target(tmp_path):
    files = make_tls_files(tmp_path)
    web = free_port()
    base = f"http://127.0.0.1:{web}"
    report_dir = tmp_path / "report"
    sync_playwright = sync_playwright_or_skip()
    with sim_process("--profile", "fast", "--tls-cert", files.server, truth_log=False) as sim:
        args = ["--web-host", "127.0.0.1", "--web-port", str(web), "--report-dir", str(report_dir)]
        with locust_process(tmp_path / "locust.log", *args), sync_playwright() as pw:
            wait_for("Locust's web UI", web_ready(base), 30)
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 950})
                fill_form(page, base, sim.url, files.ca)
                doc = wait_for("ok requests over TLS", lambda: ok_rows(base), 45)
                shot(page, "webui-tls-running.png")
                page.get_by_role("button", name="Stop").click()
                wait_for(
                    "the run to stop",
                    lambda: get_json(base + "/loadkit/stats.json")["state"] == "stopped",
                    60,
                )
            finally:
                browser.close()
    row = totals(doc)["openai"]
    assert row["failures"] == 0 and row["requests"] >= 10, row
    manifest = wait_for("report.json", lambda: _manifest(report_dir), 30)
    assert manifest["tls"]["ca_bundle"] == files.ca and manifest["tls"]["verify"] is True


def fill_form(page, base: str, host: str, ca: str) -> None:
    page.goto(base + "/", timeout=15_000)
    page.wait_for_selector("input[name=userCount]", timeout=15_000)
    page.fill("input[name=userCount]", "3")
    page.fill("input[name=spawnRate]", "3")
    page.fill("input[name=host]", host)
    if not page.is_visible("input[name=caBundle]"):
        page.get_by_text("Custom parameters").click()
    page.fill("input[name=scenario]", str(SCENARIO))
    page.fill("input[name=caBundle]", ca)
    for name in ("clientCert", "clientKey", "insecure"):
        assert page.locator(f"input[name={name}]").count() == 1, name  # every TLS option is in the form
    assert not page.is_checked("input[name=insecure]")
    shot(page, "webui-tls-start-form.png")
    page.get_by_role("button", name="Start").click()


def ok_rows(base: str):
    doc = get_json(base + "/loadkit/stats.json")
    row = totals(doc).get("openai")
    return doc if row and row["requests"] - row["failures"] >= 10 else None


def _manifest(report_dir):
    import json

    path = report_dir / "report.json"
    return json.loads(path.read_text())["manifest"] if path.exists() else None
