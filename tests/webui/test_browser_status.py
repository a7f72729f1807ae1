"""The run's truth in a real browser (Debian's chromium via Playwright): on the LLM tab the
run's validity and why, its warnings, the SLOs in force and what the server said when requests
failed; cancelled requests apart from failures; a start that cannot work answered in the form
and in the status panel, not only in Logs. Servers are scripted loopback servers; Locust runs
as real processes (local, and master + two workers for a lost worker). Screenshots go to
test-artifacts/."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers import variants
from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, stop_process, wait_for, web_ready
from tests.helpers.scripted_server import ScriptedServer
from tests.webui.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    REPO,
    SCENARIO,
    locust_process,
    shot,
    sync_playwright_or_skip,
    table_rows,
    totals,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]


@contextmanager
def browser_page() -> Iterator[Any]:
    sync_playwright = sync_playwright_or_skip()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_context(viewport={"width": 1500, "height": 950}).new_page()
        finally:
            browser.close()


def submit_form(page: Any, base: str, host: str, scenario: str = str(SCENARIO), users: int = 2) -> None:
    page.goto(base + "/", timeout=15_000)
    page.wait_for_selector("input[name=userCount]", timeout=15_000)
    page.fill("input[name=userCount]", str(users))
    page.fill("input[name=spawnRate]", str(users))
    page.fill("input[name=host]", host)
    if not page.is_visible("input[name=scenario]"):
        page.get_by_text("Custom parameters").click()
    page.fill("input[name=scenario]", scenario)
    page.get_by_role("button", name="Start").click()


def panel(page: Any) -> dict[str, str]:
    """The status panel's parts as text ("" when absent or hidden)."""
    return page.evaluate(
        """() => {
            const box = document.getElementById("loadkit-status");
            const text = id => { const e = document.getElementById(id); return e ? e.textContent : ""; };
            return {shown: box && box.style.display !== "none" ? "yes" : "", validity: text("loadkit-validity"),
                    reasons: text("loadkit-reasons"), warnings: text("loadkit-warnings"), slos: text("loadkit-slos"),
                    messages: text("loadkit-messages"), start_error: text("loadkit-start-error"),
                    task_errors: text("loadkit-task-errors")};
        }"""
    )


@contextmanager
def local_locust(tmp_path, *extra: str) -> Iterator[str]:
    web = free_port()
    base = f"http://127.0.0.1:{web}"
    args = [
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(web),
        "--report-dir",
        str(tmp_path / "report"),
        *extra,
    ]
    with locust_process(tmp_path / "locust.log", *args):
        wait_for("Locust's web UI", web_ready(base), 30)
        yield base


def test_llm_tab_shows_validity_reasons_slos_server_messages_and_cancelled(tmp_path):
    # Half the streams end in an in-band error: over the 40 % threshold, so the run is invalid.
    script = variants.server(variants.with_done, every=2, other=variants.in_band_error)
    with ScriptedServer(script) as srv, local_locust(tmp_path, "--engine", "vllm", "--slo", "ttft_ms=500",
                                                    "--max-failed-share", "40") as base:  # fmt: skip
        with browser_page() as page:
            submit_form(page, base, srv.url)
            wait_for("failed requests", lambda: sum(r["failures"] for r in totals(get_json(base + "/loadkit/stats.json")).values()) >= 10, 30)  # fmt: skip
            page.get_by_role("tab", name="LLM").click()
            live = wait_for(
                "the panel to say INVALID so far",
                lambda: (p := panel(page))["validity"] == "INVALID so far" and p["shown"] and p["slos"] and p,
                20,
            )  # every field drawn
            assert live["shown"] and "SLOs in force: ttft_ms ≤ 500 ms" == live["slos"]
            assert "% of requests failed" in live["reasons"] and "threshold 40%" in live["reasons"]
            assert "in_band_error ×" in live["messages"] and variants.IN_BAND_MESSAGE in live["messages"]
            shot(page, "status-llm-tab-invalid.png")
            page.get_by_role("button", name="Stop").click()
            wait_for(
                "the run to stop", lambda: get_json(base + "/loadkit/stats.json")["state"] == "stopped", 30
            )
            doc = get_json(base + "/loadkit/stats.json")
            final = wait_for(
                "the panel to settle", lambda: (p := panel(page))["validity"] == "INVALID" and p, 20
            )
            engine = totals(doc)["vllm"]
            (row,) = wait_for("the final table", lambda: [r for r in table_rows(page) if r.get("Label") == "*"
                                                         and r.get("User class") == "*" and int(r["Requests"]) == engine["requests"]], 20)  # fmt: skip
            shot(page, "status-llm-tab-stopped.png")
    failed = engine["failed_outcomes"]["in_band_error"]
    assert int(row["Failures"]) == engine["failures"] == failed  # cancelled ones are not failures
    assert int(row["Cancelled"]) == engine["cancelled"]
    assert row["Top server messages"] == f"in_band_error ×{failed}: {variants.IN_BAND_MESSAGE}"
    assert f"in_band_error ×{failed}: {variants.IN_BAND_MESSAGE}" in final["messages"]
    assert doc["invalid_reasons"] and doc["invalid_reasons"][0] in final["reasons"]


def test_start_errors_are_shown_in_the_form_and_in_the_panel(tmp_path):
    closer = socket.socket()  # accepts connections and closes them: reachable, but says nothing
    closer.bind(("127.0.0.1", 0))
    closer.listen(16)
    stop = threading.Event()

    def close_all() -> None:
        while not stop.is_set():
            try:
                conn, _ = closer.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=close_all, daemon=True).start()
    mute = f"http://127.0.0.1:{closer.getsockname()[1]}"
    try:
        with local_locust(tmp_path, "--engine", "auto") as base, browser_page() as page:
            submit_form(page, base, mute, scenario="/nonexistent/scenario.toml")
            wait_for(
                "the form to show the scenario error",
                lambda: page.get_by_text("cannot read file").count() > 0,
                15,
            )
            wait_for(
                "the panel's start error",
                lambda: "/nonexistent/scenario.toml" in panel(page)["start_error"],
                10,
            )
            assert get_json(base + "/loadkit/stats.json")["state"] == "ready"  # nothing started
            shot(page, "status-form-bad-scenario.png")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                gone = f"http://127.0.0.1:{s.getsockname()[1]}"
            submit_form(page, base, gone)
            wait_for(
                "the form to show the unreachable target",
                lambda: page.get_by_text("is unreachable").count() > 0,
                15,
            )
            # Reachable but answering nothing: the form's check passes, engine detection at the
            # start fails, and the panel says so on whatever tab is open.
            submit_form(page, base, mute)
            shown = wait_for(
                "the panel's start error",
                lambda: "nothing answered" in (p := panel(page))["start_error"] and p,
                30,
            )
            assert shown["shown"]
            shot(page, "status-start-error-panel.png")
            assert "--engine auto: nothing answered" in get_json(base + "/loadkit/stats.json")["start_error"]
    finally:
        stop.set()
        closer.close()


def test_a_lost_worker_is_a_warning_and_makes_the_run_invalid(tmp_path):
    web, master_port = free_port(), free_port()
    base = f"http://127.0.0.1:{web}"
    with ScriptedServer(variants.server(variants.with_done)) as srv:
        master_args = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
                       "--expect-workers", "2", "--web-host", "127.0.0.1", "--web-port", str(web),
                       "--report-dir", str(tmp_path / "report"), "--engine", "vllm"]  # fmt: skip
        worker_args = ["--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port)]
        with (
            locust_process(tmp_path / "master.log", *master_args),
            locust_process(tmp_path / "worker1.log", *worker_args),
            locust_process(tmp_path / "worker2.log", *worker_args) as doomed,
        ):
            wait_for("Locust's web UI", web_ready(base), 30)
            wait_for("two workers", lambda: get_json(base + "/stats/requests")["worker_count"] == 2, 30)
            with browser_page() as page:
                submit_form(page, base, srv.url, users=4)
                wait_for("requests from both workers", lambda: all(
                    n["last_seq"] > 0 for n in get_json(base + "/loadkit/stats.json")["workers"]["nodes"]), 30)  # fmt: skip
                page.get_by_role("tab", name="LLM").click()
                wait_for("the panel", lambda: panel(page)["validity"] == "valid so far", 20)
                os.kill(doomed.pid, signal.SIGKILL)
                shown = wait_for(
                    "the lost-worker warning", lambda: "lost" in (p := panel(page))["warnings"] and p, 45
                )
                shot(page, "status-lost-worker.png")
    assert shown["validity"] == "INVALID so far"
    assert "lost" in shown["reasons"] and "its data up to snapshot" in shown["warnings"]
    assert shown["slos"] == "SLOs in force: none (goodput not computed)"


def test_exceptions_in_the_tasks_are_listed_in_the_panel(tmp_path):
    """A locustfile whose task raises after each ok turn 1 (tests/integration/locustfiles/
    task_raises.py): no request fails, the run stays valid, and the panel lists the exceptions
    per class and kind with where they were raised, as report.json counts them."""
    web = free_port()
    base = f"http://127.0.0.1:{web}"
    report_dir = tmp_path / "report"
    locustfile = REPO / "tests" / "integration" / "locustfiles" / "task_raises.py"
    with sim_process("--profile", "fast", truth_log=False) as sim, open(tmp_path / "locust.log", "wb") as log:
        cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), "--no-console-table", "--web-host", "127.0.0.1",
               "--web-port", str(web), "--report-dir", str(report_dir), "--stop-timeout", "5"]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            wait_for("Locust's web UI", web_ready(base), 30)
            with browser_page() as page:
                page.goto(base + "/", timeout=15_000)
                page.wait_for_selector("input[name=userCount]", timeout=15_000)
                page.fill("input[name=userCount]", "2")
                page.fill("input[name=spawnRate]", "2")
                page.fill("input[name=host]", sim.url)
                page.get_by_role("button", name="Start").click()
                page.get_by_role("tab", name="LLM").click()
                live = wait_for("the panel's task errors", lambda: "KeyError" in (p := panel(page))["task_errors"]
                                and "ValueError" in p["task_errors"] and p, 45)  # fmt: skip
                assert live["shown"] and live["validity"] == "valid so far" and not live["messages"]
                shot(page, "status-task-errors.png")
                page.get_by_role("button", name="Stop").click()
                wait_for(
                    "the run to stop",
                    lambda: get_json(base + "/loadkit/stats.json")["state"] == "stopped",
                    30,
                )
                doc = get_json(base + "/loadkit/stats.json")
                final = wait_for("the panel to settle", lambda: (p := panel(page))["validity"] == "valid" and all(
                    f"×{e['count']}:" in p["task_errors"] for e in doc["task_errors"]) and p, 20)  # fmt: skip
        finally:
            stop_process(proc)
    report = json.loads((report_dir / "report.json").read_text())
    breaks = report["task_errors"]["Breaks"]
    assert {(e["type"], e["count"]) for e in breaks["errors"]} == {
        (e["type"], e["count"]) for e in doc["task_errors"]
    }
    assert report["sessions"]["openai"]["broken_by"]["task_error"] == breaks["count"] > 0
    assert "Exceptions in the locustfile's tasks" in final["task_errors"]
    assert (
        "Breaks · ValueError ×" in final["task_errors"]
        and ": the reply named no tool (at task_raises.py:" in final["task_errors"]
    )
    assert (
        "Breaks · KeyError ×" in final["task_errors"]
        and ": 'tool' (at task_raises.py:" in final["task_errors"]
    )
