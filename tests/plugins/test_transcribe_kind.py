"""A third party's request kind end to end (tests/plugins/transcribe, installed as a real
distribution with an entry point): the kind registered through ``loadkit_register_kinds`` and
built from a scenario part's keys, its adapter's request and parser, and the simulator protocol
that answers it, through ``loadkit.client.timer.run_request`` and the truth log."""

from __future__ import annotations

import random
import sys
from types import SimpleNamespace

import pytest

from loadkit import plugins
from loadkit import types as t
from loadkit.client.timer import run_request
from loadkit.run.errors import ConfigError
from loadkit.run.workloads import refuse_unserved_kinds
from loadkit.sim import protocols
from loadkit.sim.testing import sim_thread
from tests.plugins.transcribe import PLUGIN, install


def _forget() -> None:
    plugins.get_plugin_manager.cache_clear()
    protocols.builtin_protocols.cache_clear()
    protocols.plugin_protocols.cache_clear()
    sys.modules.pop("transcribe_plugin", None)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin installed on this process's path; the registries rebuilt with it, and
    without it again afterwards."""
    install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delenv("LOADKIT_LOAD_PLUGINS", raising=False)
    _forget()
    yield sys.modules.get("transcribe_plugin") or __import__("transcribe_plugin")
    _forget()


def test_the_kind_is_registered_and_built_from_its_keys(plugin):
    info = plugins.kind_registry()["transcription"]
    assert info.plugin == PLUGIN
    kind = plugins.get_kind("transcription")
    assert (kind.streaming, kind.item, kind.keys) == (False, "second", ("seconds",))
    rng = random.Random(3)
    requests = [kind.build({"seconds": [2, 4], "label": "asr"}, rng) for _ in range(20)]
    assert {r.kind for r in requests} == {"transcription"} and {r.label for r in requests} == {"asr"}
    assert {r.kind_fields["seconds"] for r in requests} == {2, 3, 4}
    assert all(r.n_items == r.kind_fields["seconds"] for r in requests)
    assert plugins.get_engine("transcribe").adapter().serves("transcription")


def test_a_transcription_through_the_client_against_the_plugins_simulator(plugin, tmp_path):
    kind = plugins.get_kind("transcription")
    adapter = plugins.get_engine("transcribe").adapter()
    log = tmp_path / "truth.jsonl"
    with sim_thread("transcribe", truth_log=str(log)) as sim:
        requests = [kind.build({"seconds": s}, random.Random(0)) for s in (1, 3)]
        records = [run_request(adapter, sim.url, r) for r in requests]
        bad = run_request(adapter, sim.url, requests[0], extra_headers={"X-Loadkit-Fault": "error_event"})
        truth = sim.wait_truth_for({r.request_id for r in [*records, bad]})
    for rec, seconds in zip(records, (1, 3), strict=True):
        row = truth[rec.request_id]
        assert (rec.outcome, rec.error, rec.end, rec.kind) == (t.OK, None, "body", "transcription")
        assert rec.n_items == rec.n_items_returned == seconds  # the seconds the server heard
        assert (row["path"], row["kind"], row["items"]) == (
            "/v1/audio/transcriptions",
            "transcription",
            seconds,
        )
        assert row["prompt_tokens"] == 50 * seconds  # 50 encoder tokens per second of audio
        assert rec.request_bytes > 16_000 * seconds  # the WAV went over the wire
        assert rec.t_first_ns is None and rec.t_end_ns >= row["t_token_ns"][0]
    longer = records[1].to_json()
    assert longer["latency_per_item_ms"] == pytest.approx(longer["latency_ms"] / 3)
    assert bad.outcome == t.IN_BAND_ERROR and "simulated engine error" in bad.error


def test_a_target_that_does_not_serve_the_kind_is_refused_at_start(plugin):
    workload = SimpleNamespace(label="asr.toml", scenario=SimpleNamespace(parts=[{"kind": "transcription"}]))
    ok = SimpleNamespace(name="asr", adapter=plugins.get_engine("transcribe").adapter())
    refuse_unserved_kinds([workload], [ok])
    other = SimpleNamespace(name="chat", adapter=plugins.get_engine("vllm").adapter())
    with pytest.raises(
        ConfigError, match="target 'chat': engine 'vllm' does not serve transcription requests"
    ):
        refuse_unserved_kinds([workload], [ok, other])
