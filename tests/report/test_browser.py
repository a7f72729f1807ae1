"""The HTML report of a REAL simulator run, opened in headless chromium: no errors, every plot drawn."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.simruns import REPO, STAGED_SESSIONS, loadkit, sim_run

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip
EXPECTED = {"slo-attainment", "ttft-cdf", "ttft-sched-cdf", "tpot-cdf", "itl-cdf", "e2e-cdf", "throughput-ts",
            "inflight-ts", "ttft-ts", "latency-throughput", "length-buckets", "ttft-turn", "outcomes", "server-running"}  # fmt: skip
ARTIFACT = REPO / "test-artifacts" / "report.png"

# Per plot: its box, and how many drawn marks (paths, rects, circles) have a non-zero box.
PLOT_STATE = """() => Array.from(document.querySelectorAll('svg.plot')).map(svg => {
  const box = svg.getBoundingClientRect();
  const drawn = Array.from(svg.querySelectorAll('.series')).filter(el => {
    const b = el.getBBox(); return b.width + b.height > 0; }).length;
  return {id: svg.dataset.plot, w: box.width, h: box.height, drawn: drawn,
          ticks: svg.querySelectorAll('text.tk').length, title: svg.querySelector('text.tt')?.textContent};
})"""


def _playwright():
    required = os.environ.get("LOADKIT_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("LOADKIT_REQUIRE_BROWSER=1 but playwright is not installed")
        pytest.skip("playwright is not installed")
    if not Path(CHROMIUM).exists():
        if required:
            pytest.fail(f"LOADKIT_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install -y chromium)")
        pytest.skip(f"{CHROMIUM} is missing")
    return sync_playwright


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> Path:
    folder = sim_run(tmp_path_factory.mktemp("browser") / "run", "--sim", "fast=fast", "--sim", "big=big",
                     "--scenario", str(STAGED_SESSIONS), "--slo", "ttft_ms=500", "--slo", "tpot_ms=50",
                     "--scrape-interval", "1", seconds=9)  # fmt: skip
    proc = loadkit("report", str(folder))
    assert proc.returncode == 0, proc.stderr
    return folder / "report.html"


def test_report_of_a_real_run_renders_in_chromium(real_report: Path):
    sync_playwright = _playwright()
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on(
                "console",
                lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on(
                "request",
                lambda r: errors.append(f"fetched {r.url}") if not r.url.startswith("file://") else None,
            )
            page.goto(real_report.as_uri(), wait_until="load")
            plots = page.evaluate(PLOT_STATE)
            ARTIFACT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACT), full_page=True)
        finally:
            browser.close()
    assert errors == []
    by_id = {p["id"]: p for p in plots}
    assert EXPECTED <= set(by_id), f"missing plots: {EXPECTED - set(by_id)}"
    for plot in plots:
        assert plot["w"] > 100 and plot["h"] > 100, plot
        assert plot["drawn"] >= 1 and plot["title"], plot
        assert plot["ticks"] >= 2 or plot["id"] in ("outcomes", "slo-attainment", "length-buckets"), plot
    assert ARTIFACT.stat().st_size > 50_000
