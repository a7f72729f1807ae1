"""The server-side breakdown end to end (issue 26): a real headless Locust run against the
simulator speaking llama.cpp, Ollama and SGLang natively. The simulator reports its own
per-request stage times in each protocol's form and writes them to its truth log; every ok
record's server timings must equal the truth log's, and what is left of TTFT once the
server's queue and prefill are taken out must never be negative."""

from __future__ import annotations

import pytest

from loadkit.report import write_html
from loadkit.sim.testing import sim_process
from tests.helpers.runs import (
    SCENARIOS,
    check_conservation,
    load_report,
    raw_records,
    run_locust,
    truth_for,
)

pytestmark = pytest.mark.integration

TARGETS = {"llama": "engine=llamacpp,api=native", "ollama": "engine=ollama,api=chat,model=sim",
           "sglang": "engine=sglang,api=native"}  # fmt: skip
SOURCES = {"llama": "llamacpp", "ollama": "ollama", "sglang": "sglang"}


def run(tmp_path):
    report_dir = tmp_path / "r"
    serve = [
        a for family in ("llamacpp", "ollama", "sglang") for a in ("--serve", f"{family}:0:profile=fast")
    ]
    with sim_process(*serve, "--seed", "7") as sim:
        targets = [a for (name, opts), url in zip(TARGETS.items(), sim.urls, strict=True)
                   for a in ("--target", f"{name}={url},{opts}")]  # fmt: skip
        proc = run_locust(
            "--headless", "-u", "6", "-r", "6", "-t", "6s", "--stop-timeout", "5", *targets,
            "--scenario", str(SCENARIOS / "closed_small.toml"), "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
        truth = truth_for(sim, report_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return report_dir, truth, proc.stdout + proc.stderr


def check_record(r: dict, t: dict) -> None:
    sent = t["server_timings"]
    # What the adapter passed on is exactly what the simulator sent (Ollama's parser keeps
    # the durations; the counts go to usage).
    assert r["server_timings"] == {k: sent[k] for k in r["server_timings"]}, (r["server_timings"], sent)
    b = r["server_breakdown"]
    assert b["source"] == SOURCES[r["engine"]]
    stages = t["server_stages_ms"]
    # The truth's own stages add up: arrival → first token written = queue + prefill.
    assert stages["queue"] + stages["prefill"] == pytest.approx(
        (t["t_token_ns"][0] - t["t_arrival_ns"]) / 1e6, abs=1e-6
    )
    if r["engine"] == "sglang":
        assert b["queue_ms"] == pytest.approx(stages["queue"], abs=1e-6)
        assert b["prefill_ms"] is None and b["residual_ttft_ms"] is None  # SGLang does not split it out
        return
    assert b["prefill_ms"] == pytest.approx(stages["prefill"], abs=1e-3)
    assert b["decode_ms"] == pytest.approx(stages["decode"], abs=1e-3)
    if r["engine"] == "ollama":
        assert b["queue_ms"] == pytest.approx(stages["queue"], abs=1e-5)
        server_before_first = stages["queue"] + stages["prefill"]
    else:
        assert b["queue_ms"] is None  # llama.cpp's timings have no queue: the residual holds it
        server_before_first = stages["prefill"]
    assert b["residual_ttft_ms"] >= 0, (r["ttft_ms"], b)
    assert b["residual_ttft_ms"] == pytest.approx(r["ttft_ms"] - server_before_first, abs=1e-3)


def test_record_timings_equal_the_truth_log_and_the_report_shows_them(tmp_path):
    report_dir, truth, console = run(tmp_path)
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    ok = [r for r in rows if r["outcome"] == "ok"]
    assert {r["engine"] for r in ok} == set(TARGETS) and len(ok) >= 30
    for r in ok:
        check_record(r, truth[r["request_id"]])
    for name in TARGETS:
        b = report["engines"][name]["server_breakdown"]
        n_ok = sum(1 for r in ok if r["engine"] == name)
        assert b["requests_reported"] == n_ok and b["requests_not_reported"] == 0
        assert b["sources"] == {SOURCES[name]: n_ok} and b["negative_residuals"] == 0
    llama = report["engines"]["llama"]["server_breakdown"]["stages"]
    assert llama["prefill_ms"]["count"] == len([r for r in ok if r["engine"] == "llama"])
    assert llama["residual_ttft_ms"]["p50"] >= 0
    assert report["engines"]["sglang"]["server_breakdown"]["stages"]["prefill_ms"] is None
    assert "server breakdown llama:" in console and "server breakdown ollama:" in console
    html = write_html(report_dir).read_text()
    sec = html.split('<section id="breakdown">')[1].split("</section>")[0]
    assert 'data-plot="server-breakdown"' in sec and "llama: TTFT:" in sec
    assert load_report(report_dir)["engines"]["llama"]["server_breakdown"]["dominant"]["ttft"] is not None
