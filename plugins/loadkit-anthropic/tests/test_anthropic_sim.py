"""The plugin's simulator protocol: `loadkit sim --engine anthropic` serves the Messages API,
and a real headless load through the plugin's adapter measures what the server's truth log
says it sent."""

import http.client

import orjson
import pytest
from loadkit_anthropic.sim import PROTOCOL

from loadkit.sim.protocols import all_families, plugin_protocols
from loadkit.sim.testing import sim_process
from loadkit.testing.simrun import run_against_sim


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
        assert status == 400 and orjson.loads(body)["error"] == {
            "type": "invalid_request_error",
            "message": "max_tokens: Field required",
        }
        status, body = post(
            sim, {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}
        )
        answer = orjson.loads(body)
        assert status == 200 and answer["type"] == "message" and answer["usage"]["output_tokens"] <= 4


@pytest.mark.slow
@pytest.mark.integration
def test_headless_load_matches_the_truth_log(tmp_path):
    run = run_against_sim(tmp_path, "anthropic", sim_args=["--fault", "error_event=0.1"])
    run.check_against_truth()  # tokens, prompt, cached tokens, every event's time, TTFT to the ms
    assert "--engine auto: found: anthropic" in run.proc.stderr
    errors = run.outcome("in_band_error")
    assert len(run.rows) == 40 and len(run.outcome("ok")) + len(errors) == 40 and errors
    for r in errors:  # the simulator's injected error event, reported with the server's own text
        assert run.truth[r["request_id"]]["fault"] == "error_event" and "simulated engine error" in r["error"]
