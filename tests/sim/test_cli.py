"""The ``loadkit sim`` command: options, refusals, several engines, clean stop, truth log."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from loadkit.errors import UserError
from loadkit.sim import cli
from loadkit.sim.testing import sim_process
from tests.sim.rawclient import request

BODY = {"model": "m", "prompt": "hello world", "max_tokens": 5, "stream": True, "ignore_eos": True}


@pytest.mark.parametrize("argv, message", [
    (["--block-size", "0"], "--block-size must be >= 1"),
    (["--decode-base-ms", "-2"], "--decode-base-ms must be >= 0"),
    (["--prefill-us-per-token", "-1"], "--prefill-us-per-token must be >= 0"),
    (["--profile", "huge"], "unknown profile"),
    (["--fault", "drop_mid_stream=2"], "within"),
    (["--serve", "vllm:8000"], "FAMILY:PORT"),
    (["--serve", "openai:99999"], "port must be"),
    (["--serve", "openai:0:block_size=0"], "--block-size must be >= 1"),
    (["--serve", "openai:0:colour=red"], "unknown option"),
    (["--serve", "openai:0:decode_base_ms=fast"], "bad value"),
    (["--serve", "openai:8000", "--serve", "ollama:8000"], "same port"),
    (["--port", "0", "--serve", "openai:0"], "either --port or --serve"),
    (["--stall-seconds", "-1"], "--stall-seconds"),
])  # fmt: skip
def test_impossible_options_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        cli.main(argv)


def test_refusal_is_one_line_exit_2_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "loadkit.sim", "--block-size", "0"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "loadkit sim: error: --block-size must be >= 1 (got 0)"


def test_list_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--list-profiles"]) == 0
    out = capsys.readouterr().out
    assert '"default"' in out and '"fast"' in out and '"big"' in out


def test_profiles_differ_visibly() -> None:
    from loadkit.sim.config import PROFILES

    assert PROFILES["big"].decode_base_ms > 3 * PROFILES["default"].decode_base_ms
    assert PROFILES["fast"].prefill_us_per_token < PROFILES["default"].prefill_us_per_token


@pytest.mark.integration
def test_two_engines_one_process_then_clean_sigint() -> None:
    with sim_process(
        "--serve", "openai:0:profile=fast", "--serve", "ollama:0:profile=fast,model=tiny"
    ) as sim:
        assert len(sim.urls) == 2
        a = request(sim.ports[0], "POST", "/v1/completions", BODY)
        b = request(sim.ports[1], "POST", "/api/generate", {"prompt": "hi", "options": {"num_predict": 2}})
        assert a.status == 200 and a.sse_data()[-1] == "[DONE]"
        assert b.ndjson()[-1]["done"] is True and b.ndjson()[-1]["model"] == "tiny"
        assert sim.process is not None
        sim.process.send_signal(signal.SIGINT)
        assert sim.process.wait(timeout=10) == 0
        records = sim.truth_records()  # flushed at shutdown
        assert {r["engine"] for r in records} == {"openai", "ollama"}


@pytest.mark.integration
def test_sigterm_mid_stream_still_records_the_request() -> None:
    import socket

    with sim_process("--profile", "fast") as sim:
        body = b'{"prompt": "hi", "max_tokens": 5000, "stream": true, "ignore_eos": true}'
        sock = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        sock.recv(4096)  # the stream has started
        time.sleep(0.3)  # some tokens are out
        assert sim.process is not None
        sim.process.terminate()
        assert sim.process.wait(timeout=10) == 0
        (record,) = sim.truth_records()
        sock.close()
    assert record["server_shutdown"] is True and 0 < record["completion_tokens"] < 5000


@pytest.mark.integration
def test_truth_log_matches_what_the_client_saw() -> None:
    with sim_process("--profile", "fast", "--decode-base-ms", "20") as sim:
        resp = request(sim.port, "POST", "/v1/completions", BODY, {"X-Request-ID": "req-42"})
        t_done = time.monotonic_ns()
        (record,) = sim.wait_truth(1)
    assert resp.headers["x-request-id"] == "req-42" and record["request_id"] == "req-42"
    assert record["completion_tokens"] == 5 and record["tokens_per_event"] == [1] * 5
    assert record["prompt_tokens"] == 2 and record["cached_tokens"] == 0 and record["fault"] is None
    sent = record["t_token_ns"]
    assert record["t_arrival_ns"] < sent[0] and sent == sorted(sent) and record["t_end_ns"] <= t_done
    # Each event arrived after the server stamped it (same monotonic clock), and ~20 ms apart.
    token_chunks = [t for t, c in zip(resp.t_chunks_ns, resp.chunks, strict=True) if b'"text"' in c]
    assert len(token_chunks) == 5 and all(r >= s for r, s in zip(token_chunks, sent, strict=True))
    # Steps are scheduled back to back from the previous *scheduled* end, so the mean gap is
    # the step time; bounds are loose because this 2-core machine is shared (events can be late).
    assert 17e6 < (sent[-1] - sent[0]) / 4 < 35e6
