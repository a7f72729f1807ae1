"""A run whose workload sends a kind (embeddings, rerank) refuses, at start, a target whose
engine does not serve it, naming target, engine, kind and the engines that serve it
(loadkit/run/workloads.py refuse_unserved_kinds); the kinds come from the workload's ``kinds()``,
its scenario's ``kinds`` (parts of every kind, a [rag] user's three) or its scenario's parts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadkit.engines.base import AdapterOptions
from loadkit.plugins import get_engine
from loadkit.run.errors import ConfigError
from loadkit.run.workloads import refuse_unserved_kinds, workload_kinds


def target(engine: str) -> SimpleNamespace:
    return SimpleNamespace(name=f"t-{engine}", adapter=get_engine(engine).adapter(AdapterOptions()))


def workload(*kinds: str) -> SimpleNamespace:
    parts = [{"kind": k, "weight": 1} for k in kinds]
    return SimpleNamespace(label="rag.toml", scenario=SimpleNamespace(parts=parts))


@pytest.mark.parametrize("engine", ["openai", "vllm", "sglang", "llamacpp", "tgi"])
def test_engines_with_both_endpoints_pass(engine):
    refuse_unserved_kinds([workload("chat", "embeddings", "rerank")], [target(engine)])


@pytest.mark.parametrize(
    ("engine", "kinds", "kind", "serves"),
    [
        ("tensorrt-llm", ("embeddings",), "embeddings", "chat"),
        ("ollama", ("embeddings", "rerank"), "rerank", "chat, embeddings"),
    ],
)
def test_an_engine_without_the_endpoint_is_refused_by_name(engine, kinds, kind, serves):
    with pytest.raises(ConfigError) as err:
        refuse_unserved_kinds([workload(*kinds)], [target("vllm"), target(engine)])
    serving = {
        "embeddings": "openai, vllm, sglang, tgi, llamacpp, ollama",
        "rerank": "openai, vllm, sglang, tgi, llamacpp",
    }
    assert str(err.value) == (f"target 't-{engine}': engine '{engine}' does not serve {kind} requests "
                              f"(scenario 'rag.toml' sends them; {engine} serves: {serves}; "
                              f"engines that serve {kind}: {serving[kind]})")  # fmt: skip


def test_kinds_come_from_the_workload_first_then_its_parts_and_default_to_chat():
    assert workload_kinds(SimpleNamespace(kinds=lambda: {"rerank"}, scenario=None)) == {"rerank"}
    assert workload_kinds(workload("embeddings", "chat")) == {"embeddings", "chat"}
    assert workload_kinds(SimpleNamespace(label="x", scenario=SimpleNamespace())) == {"chat"}
    refuse_unserved_kinds([SimpleNamespace(label="x", scenario=SimpleNamespace())], [target("tensorrt-llm")])


def test_an_unknown_plugin_kind_is_refused_too():
    with pytest.raises(ConfigError, match="does not serve transcription requests"):
        refuse_unserved_kinds([workload("transcription")], [target("openai")])


def test_a_scenarios_own_kinds_parts_and_rag(tmp_path):
    from loadkit.workload.scenario import load_scenario

    path = tmp_path / "mix.toml"
    path.write_text(
        'schema = "loadkit.scenario/1"\nname = "m"\nseed = 1\n'
        '[[parts]]\nname = "c"\ninput = 5\noutput = 5\n'
        '[[parts]]\nname = "e"\nkind = "embeddings"\ninputs = 2\ninput_tokens = 5\n'
    )
    mixed = load_scenario(path)
    assert mixed.kinds == ("chat", "embeddings")
    assert workload_kinds(SimpleNamespace(label="mix.toml", scenario=mixed)) == {"chat", "embeddings"}
    path.write_text(
        'schema = "loadkit.scenario/1"\nname = "r"\nseed = 1\n[rag]\nquery_tokens = 5\n'
        "documents = 3\ndocument_tokens = 5\ntop_k = 2\noutput_tokens = 4\n"
    )
    rag = SimpleNamespace(label="rag.toml", scenario=load_scenario(path))
    assert workload_kinds(rag) == {"embeddings", "rerank", "chat"}
    with pytest.raises(ConfigError, match="engine 'ollama' does not serve rerank requests"):
        refuse_unserved_kinds([rag], [target("ollama")])
