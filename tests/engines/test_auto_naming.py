"""``--engine auto`` in a run: the target is named after what detection found, detection runs
and is logged once per URL, workers reuse the master's findings, the manifest keeps the probes."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from loadkit.run.detection import AUTO_NAME, Detections
from loadkit.servers.targets import TargetSpec, parse_target
from tests.engines.test_detect import SERVERS
from tests.helpers.stubserver import stub_server


def options(**kw):
    """The targets' part of the run configuration for these options (run/settings.py)."""
    from loadkit.run.settings import target_settings

    base = {"target": [], "targets": "", "engine": "auto", "api": "", "model": ""}
    return target_settings(SimpleNamespace(**{**base, **kw}))


def host_spec(url: str) -> TargetSpec:
    """What glue.runtime.target_specs makes of --host URL --engine auto (tested below)."""
    return TargetSpec(AUTO_NAME, url, "auto")


def probes_seen(server) -> int:
    return sum(1 for method, *_ in server.seen if method == "GET")


@pytest.mark.in_process_locust  # glue.runtime imports locust
def test_target_specs_leave_an_auto_host_target_unnamed_until_detection():
    from loadkit.locust.runtime import target_specs

    assert target_specs(options(), "http://127.0.0.1:9") == [host_spec("http://127.0.0.1:9")]
    (named,) = target_specs(options(engine="vllm"), "http://127.0.0.1:9")
    assert named.name == "vllm"


def test_a_host_target_with_engine_auto_is_named_after_the_engine_found(caplog):
    caplog.set_level(logging.INFO, logger="loadkit")
    with stub_server(SERVERS["vllm"]) as (url, seen):
        spec = host_spec(url)
        assert spec.name == AUTO_NAME
        detections = Detections()
        detections.resolve(spec, None)
        probed = probes_seen(seen)
        again = host_spec(url)  # a second configuration (headless: start-up, then test start)
        detections.begin({})
        detections.resolve(again, None)
        assert probes_seen(seen) == probed  # not probed twice
    assert (spec.name, spec.engine) == ("vllm", "vllm") and again.name == "vllm"
    lines = [r.getMessage() for r in caplog.records if "--engine auto" in r.getMessage()]
    assert lines == [
        'loadkit: target vllm: --engine auto: found: vllm (GET /v1/models lists a model owned_by "vllm")'
    ]


def test_the_generic_fallback_names_the_target_host_port():
    with stub_server(SERVERS["openai"]) as (url, _):
        spec = host_spec(url)
        detections = Detections()
        detections.resolve(spec, None)
    host_port = url.removeprefix("http://").rstrip("/")
    assert (spec.name, spec.engine) == (host_port, "openai")
    entry = detections.manifest_entry(host_port)
    assert entry["engine"] == "openai" and "fallback" in entry["explanation"]
    assert entry["probes"]["/v1/models"]["status"] == 200
    assert '"owned_by": "someone"' in entry["probes"]["/v1/models"]["body"].replace('":"', '": "')
    assert entry["probes"]["/props"]["status"] == 404


def test_explicit_names_are_kept_and_workers_use_the_masters_findings():
    with stub_server(SERVERS["sglang"]) as (url, seen):
        master = Detections()
        spec = parse_target(f"fast={url},engine=auto")
        master.begin({})
        master.resolve(spec, None)
        assert (spec.name, spec.engine) == ("fast", "sglang")
        probed = probes_seen(seen)
        worker = Detections()
        mine = parse_target(f"fast={url},engine=auto")
        worker.begin(master.to_option())  # what RunConfig.detections carries to a worker
        worker.resolve(mine, None)
        assert probes_seen(seen) == probed  # the worker asked nobody
    assert (mine.name, mine.engine) == ("fast", "sglang")
    assert worker.manifest_entry("fast") == master.manifest_entry("fast")


def test_engine_given_is_no_detection():
    spec = TargetSpec("vllm", "http://127.0.0.1:9", "vllm")
    detections = Detections()
    detections.resolve(spec, None)
    assert spec.name == "vllm" and detections.manifest_entry("vllm") is None
