"""Real headless runs against the simulator through a third-party engine plugin (loaded by its
entry point) whose parser raises ValueError on some requests: each is an `adapter_error`
failure naming plugin and engine, counted, subject to --max-failed-share and the breaker,
with one console line per kind of error and no traceback per request; its texts, which differ
only in numbers, are one row of the report's messages. Each run ends with the conservation
check."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust
from tests.plugins.flaky import PLUGIN, install

pytestmark = pytest.mark.integration

TINY = str(SCENARIOS / "tiny_fixed.toml")
NAMED = f"engine 'flaky' (plugin {PLUGIN} 0.3, adapter flaky_plugin.FlakyAdapter): parse raised ValueError: "
CONSOLE_LINE = "loadkit: target 'flaky': adapter_error: "


def flaky_run(tmp_path: Path, every: int, *extra: str, seconds: int = 4):
    env = {**install(tmp_path / "site"), "LOADKIT_FLAKY_EVERY": str(every)}
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast") as sim:
        proc = run_locust("--headless", "-u", "2", "-r", "2", "-t", f"{seconds}s", "--stop-timeout", "2",
                          "--host", sim.url, "--engine", "flaky", "--scenario", TINY, "--report-dir",
                          str(report_dir), "--raw-log", *extra, env=env)  # fmt: skip
    return proc, check_conservation(report_dir), raw_records(report_dir)


@pytest.mark.parametrize(("threshold", "code", "valid"), [("20", 3, False), ("50", 1, True)])
def test_a_parser_that_raises_is_a_counted_failure_naming_plugin_and_engine(tmp_path, threshold, code, valid):
    proc, report, rows = flaky_run(tmp_path, 3, "--max-failed-share", threshold)
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out[-3000:]
    s = report["engines"]["flaky"]
    failed = s["outcomes"].get("adapter_error", 0)
    # Every third request fails (the requests in flight at the stop may be cancelled).
    assert failed >= 5 and s["failures"] == failed and s["ok"] >= failed, s["outcomes"]
    assert s["cancelled"] <= 2, s["outcomes"]
    mine = [r for r in rows if r["outcome"] == "adapter_error"]
    assert len(mine) == failed and all(r["error"].startswith(NAMED) for r in mine)
    assert len({r["error"] for r in mine}) == failed  # each text names its own request number ...
    entry = s["error_messages"]["adapter_error"]
    (row,) = entry["top"]  # ... and all of them are one row, with the count and one example
    assert row["count"] == entry["total"] == failed and entry["other"] == 0 and row["varied"] is True
    assert row["message"] in {r["error"] for r in mine}
    assert row["template"].endswith("cannot read chunk <n> of request <n> (<n> chars)")
    # The first traceback of the kind, for the report; none on the console.
    (kind,) = report["adapter_errors"]["kinds"]
    assert kind["engine"] == "flaky" and kind["count"] == failed and kind["message"].startswith(NAMED)
    assert "flaky_plugin.py" in kind["traceback"] and kind["traceback"].rstrip().endswith(
        row["message"][len(NAMED) :]
    )
    assert "Traceback" not in out, out[-3000:]
    assert out.count(CONSOLE_LINE) == 1, out[-3000:]
    assert f"adapter_error ×{failed}: e.g. {NAMED}" in proc.stdout  # the final summary
    assert report["valid"] is valid, report["invalid_reasons"]
    if not valid:
        (reason,) = report["invalid_reasons"]
        assert "--max-failed-share" in reason and f"adapter_error ×{failed}: e.g. {NAMED}" in reason
    # The latency figures are of the ok requests, every one of them.
    assert s["ttft_ms"]["count"] == s["ok"]


def test_the_breaker_stops_a_run_whose_parser_always_raises(tmp_path):
    proc, report, rows = flaky_run(tmp_path, 1, "--breaker", "first=6", "--no-backoff", seconds=20)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-3000:]
    s = report["engines"]["flaky"]
    assert s["ok"] == 0 and s["outcomes"]["adapter_error"] >= 6, s["outcomes"]
    (reason, *_) = report["invalid_reasons"]
    assert reason.startswith("circuit breaker: target 'flaky': the first 6 requests all failed (top error: 6 × e.g. "
                             f"adapter_error: {NAMED}"), reason  # fmt: skip
    assert (
        report["manifest"]["stopped_unix"] - report["manifest"]["started_unix"] < 15
    )  # stopped, not run out
    assert "Traceback" not in out and out.count(CONSOLE_LINE) == 1, out[-3000:]
