"""The plugin as loadkit sees it: through its entry point, in `loadkit plugins`, in
--engine auto, and in a real run against a local server streaming the docs' example."""

import importlib.metadata
import os
import subprocess
import sys

import orjson
import pytest
from anthropic_helpers import messages_server, posts, stream_body

from loadkit import GenerationRequest, types
from loadkit.client.timer import Timeouts, run_request
from loadkit.engines.base import AdapterOptions
from loadkit.plugins import get_engine, new_plugin_manager
from loadkit.servers.detect import detect_engine

installed = pytest.mark.skipif(
    not any(ep.value == "loadkit_anthropic" for ep in importlib.metadata.entry_points(group="loadkit")),
    reason="loadkit-anthropic is not pip-installed (pip install -e plugins/loadkit-anthropic)",
)


def plugins_json(env_extra: dict[str, str]) -> dict:
    env = {**os.environ, **env_extra}
    out = subprocess.run(
        [sys.executable, "-m", "loadkit.cli", "plugins"], capture_output=True, env=env, timeout=60, check=True
    )
    return orjson.loads(out.stdout)


@installed
def test_listed_by_loadkit_plugins():
    listing = plugins_json({})
    engines = {e["engine"]: e for e in listing["engines"]}
    assert (
        engines["anthropic"]["plugin"] == "loadkit-anthropic" and engines["anthropic"]["version"] == "0.1.0"
    )
    protocols = {
        p["protocol"]: p for p in listing["simulator_protocols"]
    }  # what `loadkit sim --engine` takes
    assert protocols["anthropic"]["plugin"] == "loadkit-anthropic" and protocols["anthropic"]["routes"] == [
        "/v1/messages"
    ]


@installed
def test_not_loaded_when_plugins_limited():
    env = {"LOADKIT_LOAD_PLUGINS": "none"}
    assert "anthropic" not in {e["engine"] for e in plugins_json(env)["engines"]}


@installed
def test_run_and_detect_through_the_entry_point():
    pm = new_plugin_manager()
    adapter = get_engine("anthropic", pm).adapter(AdapterOptions(model="claude-test", api_key="k"))
    with messages_server(stream_body("messages_stream.sse")) as (url, requests):
        found = detect_engine(url, pm, timeout_s=2.0)
        record = run_request(
            adapter,
            url,
            GenerationRequest(prompt="Hi", max_tokens=20),
            timeouts=Timeouts(connect_s=2, first_token_s=5, total_s=10),
        )
    assert found.engine == "anthropic" and "installed plugin" in found.explanation
    assert record.outcome == types.OK, record.error
    assert record.event_tokens == [1, 1] and record.text == "Hello!"
    assert (record.n_out, record.n_out_source, record.n_in, record.cached_tokens) == (15, "usage", 125, 100)
    (sent,) = posts(requests)
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == "k"


def test_error_stream_is_in_band_error_in_a_run():
    from loadkit_anthropic import AnthropicAdapter

    with messages_server(stream_body("error_stream.sse")) as (url, _):
        record = run_request(
            AnthropicAdapter(),
            url,
            GenerationRequest(prompt="Hi"),
            timeouts=Timeouts(connect_s=2, first_token_s=5, total_s=10),
        )
    assert record.outcome == types.IN_BAND_ERROR and "overloaded" in (record.error or "")


@installed
@pytest.mark.slow
@pytest.mark.integration
def test_loadkit_run_uses_the_plugin(tmp_path):
    """`loadkit run --engine auto` detects the plugin's engine and sends every request through it,
    with the version its own --anthropic-version option set."""
    with messages_server(stream_body("messages_stream.sse")) as (url, requests):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadkit.cli",
                "run",
                "--host",
                url,
                "--engine",
                "auto",
                "--model",
                "claude-test",
                "-u",
                "2",
                "-r",
                "2",
                "-t",
                "10s",
                "--max-requests",
                "6",
                "--report-dir",
                str(tmp_path),
                "--scrape-interval",
                "0",
                "--anthropic-version",
                "2099-01-01",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--engine auto: found: anthropic" in proc.stderr
    report = orjson.loads((tmp_path / "report.json").read_bytes())
    assert report["manifest"]["targets"][0]["engine"] == "anthropic"
    assert report["manifest"]["plugins"]["anthropic"] == "loadkit-anthropic==0.1.0"
    (stats,) = report["engines"].values()
    assert stats["outcomes"] == {"ok": 6} and report["conservation"]["holds"]
    # loadkit's pre-flight request (one per target, before the run, not in its stats), then the 6.
    (seen,) = report["manifest"]["preflight"].values()
    assert seen["outcome"] == "ok" and seen["requests"] == 1
    assert len(posts(requests)) == 1 + 6 and all(r.path == "/v1/messages" for r in posts(requests))
    # The plugin's own option, parsed by Locust, reached the adapter through AdapterOptions.run_options.
    assert {r.headers.get("anthropic-version") for r in posts(requests)} == {"2099-01-01"}
