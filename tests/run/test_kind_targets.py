"""A workload sending embeddings, rerank (or a plugin's kind) refuses, at start, a target whose
adapter does not serve that kind, naming target, engine, kind and the engines that serve it
(loadkit/run/workloads.py check_kind_targets)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadkit.engines.base import AdapterOptions, EngineAdapter
from loadkit.plugins import get_engine
from loadkit.run.errors import ConfigError
from loadkit.run.workloads import check_kind_targets


class NoKinds(EngineAdapter):
    name = "nokinds"
    kind_paths: dict[str, str] = {}  # noqa: RUF012 - the contract's ClassVar, overridden


class Embeds(EngineAdapter):
    name = "embeds"
    kind_paths = {"embeddings": "/v1/embeddings"}  # noqa: RUF012


def target(adapter: EngineAdapter, name: str = "t1") -> SimpleNamespace:
    return SimpleNamespace(name=name, adapter=adapter)


def workload(*kinds: str) -> SimpleNamespace:
    return SimpleNamespace(label="emb.toml", scenario=SimpleNamespace(kinds=kinds))


def test_chat_only_workload_passes_every_engine():
    adapter = get_engine("openai").adapter(AdapterOptions())
    check_kind_targets([workload("chat")], [target(adapter)])


def test_a_target_not_serving_the_kind_is_refused_with_names():
    with pytest.raises(ConfigError) as err:
        check_kind_targets([workload("chat", "rerank")], [target(Embeds(AdapterOptions()), "emb-srv")])
    msg = str(err.value)
    assert "'emb-srv'" in msg and "'embeds'" in msg and "'rerank'" in msg and "emb.toml" in msg
    assert "engines that do:" in msg


def test_the_serving_target_passes_and_the_other_is_named():
    check_kind_targets([workload("embeddings")], [target(Embeds(AdapterOptions()))])
    with pytest.raises(ConfigError, match="'nokinds' does not serve 'embeddings'"):
        check_kind_targets(
            [workload("embeddings")],
            [target(Embeds(AdapterOptions())), target(NoKinds(AdapterOptions()), "t2")],
        )


def test_scenario_kinds_from_parts_and_rag(tmp_path):
    from loadkit.workload.scenario import load_scenario

    path = tmp_path / "mix.toml"
    path.write_text(
        'schema = "loadkit.scenario/1"\nname = "m"\nseed = 1\n'
        '[[parts]]\nname = "c"\ninput = 5\noutput = 5\n'
        '[[parts]]\nname = "e"\nkind = "embeddings"\ninputs = 2\ninput_tokens = 5\n'
    )
    assert load_scenario(path).kinds == ("chat", "embeddings")
    path.write_text(
        'schema = "loadkit.scenario/1"\nname = "r"\nseed = 1\n[rag]\nquery_tokens = 5\n'
        "documents = 3\ndocument_tokens = 5\ntop_k = 2\noutput_tokens = 4\n"
    )
    assert set(load_scenario(path).kinds) == {"embeddings", "rerank", "chat"}
