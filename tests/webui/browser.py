"""Helpers for the browser tests: Locust processes on loopback, chromium, and the LLM tab's DOM."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import stop_process

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = Path(__file__).resolve().parent / "locustfile_webui.py"
SCENARIO = REPO / "tests" / "integration" / "scenarios" / "closed_small.toml"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip


def sync_playwright_or_skip() -> Any:
    """Playwright's entry point; skip (or fail with LOADKIT_REQUIRE_BROWSER=1) when unavailable."""
    require = os.environ.get("LOADKIT_REQUIRE_BROWSER") == "1"
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "playwright is not installed (pip install playwright)"
    if problem is None and not os.access(CHROMIUM, os.X_OK):
        problem = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if problem is not None:
        if require:
            pytest.fail(f"LOADKIT_REQUIRE_BROWSER=1 but {problem}")
        pytest.skip(problem)
    return sync_playwright


@contextmanager
def locust_process(log_path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``locust -f <test locustfile> ARGS``, output to ``log_path``; stopped on exit."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--no-console-table", *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            yield proc
        finally:
            stop_process(proc)


def table_rows(page: Any) -> list[dict[str, str]]:
    """The visible table's rows as {column title: cell text}."""
    return page.evaluate(
        """() => {
            const table = document.querySelector("table");
            if (!table) return [];
            const heads = [...table.querySelectorAll("thead th")].map(th => th.textContent.trim());
            return [...table.querySelectorAll("tbody tr")].map(tr => {
                const row = {};
                [...tr.querySelectorAll("td")].forEach((td, i) => { row[heads[i]] = td.textContent.trim(); });
                return row;
            });
        }"""
    )


def triple(text: str) -> list[float | None]:
    return [None if part == "-" else float(part) for part in text.split(" / ")]


def totals(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each engine's row over every label and every user class."""
    return {r["engine"]: r for r in doc["rows"] if r["label"] == "*" and r["user_class"] == "*"}


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path
