"""The plugin's simulator protocol: `loadkit sim --engine anthropic` serves the Messages API,
and a real headless load through the plugin's adapter measures what the server's truth log
says it sent."""

import http.client
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from loadkit_anthropic.sim import PROTOCOL

from loadkit.sim.protocols import all_families, plugin_protocols
from loadkit.sim.testing import sim_process


def raw_rows(report_dir: Path) -> list[dict]:
    return [orjson.loads(line) for p in sorted(report_dir.glob("requests*.jsonl"))
            for line in p.read_bytes().splitlines() if line.strip()]


def post(sim, body: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(sim.host, sim.port, timeout=10)
    conn.request("POST", "/v1/messages", orjson.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def test_registered_through_the_entry_point():
    assert plugin_protocols()["anthropic"] is PROTOCOL and "anthropic" in all_families()


def test_the_api_own_errors_and_non_streamed_answer():
    with sim_process("--engine", "anthropic", "--profile", "fast") as sim:
        status, body = post(sim, {"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
        assert status == 400 and orjson.loads(body)["error"] == {"type": "invalid_request_error",
                                                                 "message": "max_tokens: Field required"}
        status, body = post(sim, {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]})
        answer = orjson.loads(body)
        assert status == 200 and answer["type"] == "message" and answer["usage"]["output_tokens"] <= 4


@pytest.mark.slow
@pytest.mark.integration
def test_headless_load_matches_the_truth_log(tmp_path):
    report_dir = tmp_path / "r"
    with sim_process("--engine", "anthropic", "--profile", "fast", "--seed", "5",
                     "--fault", "error_event=0.1") as sim:
        proc = subprocess.run(
            [sys.executable, "-m", "loadkit.cli", "run", "--host", sim.url, "--engine", "auto", "-u", "4", "-r", "4",
             "-t", "20s", "--max-requests", "40", "--report-dir", str(report_dir), "--raw-log", "--raw-log-events",
             "--scrape-interval", "0", "--exit-code-on-error", "0"],  # injected errors are expected
            capture_output=True, text=True, timeout=120)
        rows = raw_rows(report_dir)
        truth = {t["request_id"]: t for t in sim.wait_truth(len(rows))}
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--engine auto: found: anthropic" in proc.stderr
    report = orjson.loads((report_dir / "report.json").read_bytes())
    assert report["conservation"]["holds"] and len(rows) == 40
    ok = [r for r in rows if r["outcome"] == "ok"]
    errors = [r for r in rows if r["outcome"] == "in_band_error"]
    assert len(ok) + len(errors) == 40 and len(ok) >= 25 and errors, {r["outcome"] for r in rows}
    for r in errors:  # the simulator's injected error event, reported as the server's own text
        assert truth[r["request_id"]]["fault"] == "error_event" and "simulated engine error" in r["error"]
    lateness = []
    for r in ok:
        t = truth[r["request_id"]]
        assert (r["n_out"], r["n_out_source"], r["n_in"]) == (t["completion_tokens"], "usage", t["prompt_tokens"])
        assert r["cached_tokens"] == t["cached_tokens"]
        written = t["t_token_ns"]
        assert len(r["event_t_ns"]) == len(written), "one recorded event per event the server wrote"
        assert all(seen >= sent for seen, sent in zip(r["event_t_ns"], written, strict=True))
        lateness.append((r["t_first_ns"] - written[0]) / 1e6)
    lateness.sort()
    assert lateness[len(lateness) // 2] < 5.0, lateness  # TTFT as the server's own log has it, to the ms
