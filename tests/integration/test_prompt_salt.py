"""Reruns that do not hit the prefix cache (issue 32): back-to-back runs of one scenario against
one simulator (which keeps a prefix cache and reports cached_tokens as vLLM does). Without
--seed each run salts its prompts anew, so the second finds nothing of the first in the cache;
with the first run's salt as --seed the third sends exactly its prompts and is answered from
the cache; `loadkit compare` warns about that pair only. Lengths are the scenario's every time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadkit.sim.testing import sim_process
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, load_report, raw_records, run_locust

pytestmark = pytest.mark.integration

REQUESTS = 16


def _run(url: str, report_dir, *extra: str) -> dict:
    proc = run_locust("--headless", "-u", "2", "-r", "2", "-t", "30s", "--stop-timeout", "5", "--host", url,
                      "--engine", "vllm", "--scenario", str(SCENARIOS / "closed_small.toml"),
                      "--max-requests", str(REQUESTS), "--report-dir", str(report_dir), "--raw-log",
                      "--no-console-table", *extra, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    assert report["engines"]["vllm"]["outcomes"] == {"ok": REQUESTS}
    return report


def _cached_share(report_dir) -> float:
    rows = raw_records(report_dir)
    return sum(r["cached_tokens"] or 0 for r in rows) / sum(r["n_in"] for r in rows)


def _compare(a, b) -> str:
    proc = subprocess.run([sys.executable, "-m", "loadkit.cli", "compare", str(a), str(b), "--no-raw-log"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_reruns_salt_their_prompts_and_seed_repeats_one_exactly(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    with sim_process("--profile", "fast") as sim:
        first = _run(sim.url, a)
        second = _run(sim.url, b)
        salt = first["manifest"]["prompts"]["salt"]
        third = _run(sim.url, c, "--seed", str(salt))
    prompts = [r["manifest"]["prompts"] for r in (first, second, third)]
    assert (
        prompts[0]["salt_from"] == prompts[1]["salt_from"] == "random"
        and prompts[0]["salt"] != prompts[1]["salt"]
    )
    assert prompts[2] == {"salt": salt, "salt_from": "--seed (command line)", "repeat_with": f"--seed {salt}"}
    # The same lengths every run: the salt changes words, not the workload.
    lengths = [sorted((r["n_in_target"], r["n_in"]) for r in raw_records(d)) for d in (a, b, c)]
    assert lengths[0] == lengths[1] == lengths[2]
    # The first run met a cold cache; the second, salted anew, found nothing of it there; the
    # third, the first run's prompts again, was largely answered from the cache.
    assert _cached_share(a) < 0.05 and _cached_share(b) < 0.05, (_cached_share(a), _cached_share(b))
    assert _cached_share(c) > 0.5, _cached_share(c)
    assert "sent the same prompts" not in _compare(a, b)
    warned = _compare(a, c)
    assert f"warning: {c} sent the same prompts as {a}" in warned and f"prompt salt {salt}" in warned
    assert load_report(c)["manifest"]["prompts"]["salt"] == salt
