"""Against a reasoning target the console's TTFT is the first *reasoning* token; the run's
console table shows the time to first answer token beside it, from report.json (issue 31)."""

from __future__ import annotations

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import SCENARIOS, check_conservation, run_locust

pytestmark = pytest.mark.integration


def console_run(tmp_path, *sim_args: str) -> tuple[dict, str]:
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--seed", "7", *sim_args) as sim:
        proc = run_locust(
            "--headless", "-u", "3", "-r", "3", "-t", "4s", "--stop-timeout", "5",
            "--host", sim.url, "--engine", "vllm", "--api", "chat", "--model", "sim-fast",
            "--scenario", str(SCENARIOS / "closed_small.toml"), "--report-dir", str(report_dir),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return check_conservation(report_dir), proc.stdout + proc.stderr


def final_table(output: str) -> list[str]:
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line.rstrip().endswith("loadkit final"))
    return lines[start : start + 6]


def triple(section: dict, metric: str) -> str:
    return "/".join(
        "-" if section[metric][p] is None else f"{section[metric][p]:.1f}" for p in ("p50", "p90", "p99")
    )


def test_a_reasoning_run_shows_ttfat_beside_ttft(tmp_path):
    report, output = console_run(tmp_path, "--reasoning-mean-tokens", "40", "--reasoning-dist", "uniform",
                                 "--reasoning-format", "parser")  # fmt: skip
    table = final_table(output)
    head = table[1]
    assert "TTFT p50/p90/p99 ms" in head and "TTFAT p50/p90/p99 ms" in head, table
    assert head.index("TTFT p50") < head.index("TTFAT p50") < head.index("TPOT p50")
    section = report["engines"]["vllm"]
    row = next(line for line in table if line.startswith("vllm"))
    cells = row.split()
    assert cells[4] == triple(section, "ttft_ms") and cells[5] == triple(section, "ttfat_ms"), (
        row,
        section["ttfat_ms"],
    )
    # Thinking comes before the answer: the first answer token is later than the first token.
    assert section["ttfat_ms"]["p50"] > section["ttft_ms"]["p50"]
    assert any("TTFAT: first answer token" in line for line in table), table


def test_a_run_without_reasoning_keeps_the_plain_table(tmp_path):
    _, output = console_run(tmp_path)
    table = final_table(output)
    assert "TTFT p50/p90/p99 ms" in table[1] and "TTFAT" not in "\n".join(table), table
