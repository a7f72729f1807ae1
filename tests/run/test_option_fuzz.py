"""Bad options, fuzzed: every value either works or ends in loadkit's one-line error types,
never another exception (which would surface as a traceback)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadkit.plugins import PluginError
from loadkit.servers.targets import TargetError, TargetSpec, build_target, parse_target

REPO_LOCUSTFILE = "locustfiles/llm.py"


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_any_target_text_parses_or_is_a_target_error(text):
    try:
        spec = parse_target(text)
    except TargetError as exc:
        assert "--target" in str(exc)
        return
    assert isinstance(spec, TargetSpec) and spec.name and spec.url


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=30), st.text(max_size=40), st.sampled_from([None, "chat", "completions", "native", "x"])
)
def test_any_engine_url_api_builds_or_is_a_clear_error(engine, url, api):
    try:
        build_target(TargetSpec("t", url, engine, api), None, None)
    except (TargetError, PluginError) as exc:
        assert str(exc)


def options(**overrides):
    base = dict(engine="openai", api="", model="", api_key="", scenario="", target=[], targets="",
                first_token_timeout=60.0, request_timeout=300.0, max_requests=0, max_schedule_lag=0.0,
                late_threshold_ms=10.0, warmup=0.0, slo=None, session_header="", scrape_interval=0)  # fmt: skip
    base.update(overrides)
    return argparse.Namespace(**base)


@pytest.mark.in_process_locust
@settings(max_examples=150, deadline=None)
@given(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none()),
    st.text(max_size=40),
)
def test_runtime_configure_refuses_bad_values_clearly(first, total, scenario):
    from loadkit.locust.runtime import ConfigError, Runtime

    runtime = Runtime(environment=None)
    opts = options(first_token_timeout=first, request_timeout=total, scenario=scenario)
    try:
        runtime.configure(opts, "http://127.0.0.1:9", (0, 1))
    except (ConfigError, TargetError, PluginError) as exc:
        assert str(exc)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--first-token-timeout", "-1"], "first-token-timeout"),
        (["--target", "junk"], "--target 'junk'"),
        (["--target", "a=http://127.0.0.1:9,colour=red"], "unknown part"),
        (["--slo", "ttft=5"], "slo"),
        (["--engine", "nosuch"], "unknown engine"),
        (["--scenario", "/nonexistent/x.toml"], "x.toml"),
        (["--max-requests", "many"], "max-requests"),
        (["--seed", "x"], "--seed: 'x' is not a whole number"),
        (["--seed", "-3"], "--seed: -3 is out of range"),
    ],
)
def test_bad_options_exit_2_with_one_clear_line(args, says, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            REPO_LOCUSTFILE,
            "--headless",
            "-t",
            "1s",
            "--host",
            "http://127.0.0.1:9",
            "--skip-reachability-check",
            "--report-dir",
            str(tmp_path),
            *args,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.in_process_locust
def test_slo_typed_in_the_web_form_is_validated_clearly():
    from loadkit.locust.runtime import ConfigError, validate_slos

    good = options(slo="ttft_ms=500,tpot_ms=50")
    assert validate_slos(good) == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    assert good.slo == "ttft_ms=500,tpot_ms=50"  # checked, not written back (run/runconfig.py)
    with pytest.raises(ConfigError, match="--slo"):
        validate_slos(options(slo="ttft=fast"))
