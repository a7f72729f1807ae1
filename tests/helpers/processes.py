"""Processes a test starts and talks to over loopback HTTP: wait until one answers, read its
JSON, stop it (the web UI, a Locust master, a run's web server)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float, every_s: float = 0.25) -> Any:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except Exception as exc:  # a server still starting, a DOM still rendering
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every_s)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what} (last: {last!r})")


def get_json(url: str, timeout_s: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def web_ready(base: str) -> Callable[[], bool]:
    def probe() -> bool:
        with urllib.request.urlopen(base + "/", timeout=2) as resp:
            return resp.status == 200

    return probe
