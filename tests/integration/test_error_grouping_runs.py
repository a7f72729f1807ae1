"""A real headless run against the simulator with a short context length: the engine's 400s
each name their own token counts ("However, you requested 1043 tokens"), and the report, the
console's final summary and Locust's failure table count them as one row, with the count and
one example, not one row of ×1 each. The run ends with the conservation check."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, raw_records, run_locust

pytestmark = pytest.mark.integration

CONTEXT = "This model's maximum context length is 600 tokens. However, you requested "


def test_context_length_errors_differing_in_numbers_are_one_row_with_their_count(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--max-model-len", "600") as sim:
        proc = run_locust("--headless", "-u", "4", "-r", "4", "-t", "4s", "--stop-timeout", "2", "--host", sim.url,
                          "--engine", "vllm", "--scenario", str(SCENARIOS / "closed_small.toml"),
                          "--report-dir", str(report_dir), "--raw-log")  # fmt: skip
    out = proc.stdout + proc.stderr
    report = check_conservation(report_dir)
    (s,) = report["engines"].values()
    failed = s["outcomes"].get("http_error:400", 0)
    texts = {r["error"] for r in raw_records(report_dir) if r["outcome"] == "http_error:400"}
    assert failed >= 5 and len(texts) >= 3, (s["outcomes"], texts)  # many distinct texts ...
    entry = s["error_messages"]["http_error:400"]
    (row,) = entry["top"]  # ... one row
    assert row["count"] == entry["total"] == failed and entry["other"] == 0 and row["varied"] is True
    assert CONTEXT in row["message"] and CONTEXT.replace("600", "<n>") + "<n> tokens" in row["template"]
    assert f"http_error:400 ×{failed}: e.g. " in proc.stdout and CONTEXT in proc.stdout, proc.stdout[-3000:]
    # Locust's table: one row, the template, with every one of them.
    assert out.count("http_error:400: ") == 1 and "However, you requested <n> tokens" in out, out[-3000:]
    assert proc.returncode == 1 and report["valid"] is True, report["invalid_reasons"]
