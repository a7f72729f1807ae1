"""A run whose workload sends a kind (embeddings, rerank) refuses, at start, a target whose
engine does not serve it, naming target, engine and kind (loadkit/run/workloads.py
refuse_unserved_kinds); the kinds come from the workload's ``kinds()`` or its scenario's parts."""

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
    assert str(err.value) == (f"target 't-{engine}': engine '{engine}' does not serve {kind} requests "
                              f"(scenario 'rag.toml' sends them; {engine} serves: {serves})")  # fmt: skip


def test_kinds_come_from_the_workload_first_then_its_parts_and_default_to_chat():
    assert workload_kinds(SimpleNamespace(kinds=lambda: {"rerank"}, scenario=None)) == {"rerank"}
    assert workload_kinds(workload("embeddings", "chat")) == {"embeddings", "chat"}
    assert workload_kinds(SimpleNamespace(label="x", scenario=SimpleNamespace())) == {"chat"}
    refuse_unserved_kinds([SimpleNamespace(label="x", scenario=SimpleNamespace())], [target("tensorrt-llm")])


def test_an_unknown_plugin_kind_is_refused_too():
    with pytest.raises(ConfigError, match="does not serve transcription requests"):
        refuse_unserved_kinds([workload("transcription")], [target("openai")])
