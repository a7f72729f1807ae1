"""Scenario syntax of request kinds (loadkit/workload/kindparts.py, rag.py): embeddings and
rerank parts mixed with chat by weight, deterministic by seed on any worker split, errors that
name file and key, and the RAG user's three-turn sessions."""

from __future__ import annotations

import pytest

from loadkit import hookimpl
from loadkit.workload.errors import ScenarioError
from loadkit.workload.scenario import load_scenario

HEAD = 'schema = "loadkit.scenario/1"\nname = "k"\nseed = 5\nmax_requests = 60\n'
MIX = (
    HEAD
    + """
[[parts]]
name = "emb"
kind = "embeddings"
inputs = {dist = "uniform", low = 1, high = 16}
input_tokens = {dist = "uniform", low = 5, high = 40}
[[parts]]
name = "rr"
kind = "rerank"
weight = 2
query_tokens = 12
documents = 6
document_tokens = 30
top_n = 3
[[parts]]
name = "chat"
input = 10
output = 5
"""
)


def items(path, worker=0, workers=1):
    src = load_scenario(path).request_source(worker, workers)
    out = []
    while (r := src.next_item()) is not None:
        out.append(r)
    return out


def test_kinds_mix_by_weight_with_their_fields(tmp_path):
    path = tmp_path / "mix.toml"
    path.write_text(MIX)
    reqs = items(path)
    kinds = {k: [r for r in reqs if r.kind == k] for k in ("chat", "embeddings", "rerank")}
    assert all(kinds.values()) and len(reqs) == 60
    assert len(kinds["rerank"]) > len(kinds["embeddings"])  # weight 2 of 4 against 1 of 4
    for r in kinds["embeddings"]:
        assert r.label == "emb" and r.messages is None and r.prompt is None
        assert r.n_items == len(r.inputs) and 1 <= r.n_items <= 16
        assert r.n_in_target == sum(len(t.split()) for t in r.inputs)  # approx: one word a token
    for r in kinds["rerank"]:
        assert r.n_items == len(r.documents) == 6 and r.top_n == 3
        assert r.n_in_target == 12 + 6 * 30 and len(r.query.split()) == 12
    assert all(r.messages and r.n_items is None for r in kinds["chat"])


def test_two_workers_share_exactly_the_one_worker_stream(tmp_path):
    path = tmp_path / "mix.toml"
    path.write_text(MIX)
    one = items(path)
    split = items(path, 0, 2) + items(path, 1, 2)
    key = lambda r: (r.kind, r.label, tuple(r.inputs or ()), r.query, tuple(r.documents or ()))  # noqa: E731
    assert sorted(map(key, one)) == sorted(map(key, split))
    assert [key(r) for r in items(path)] == [key(r) for r in one]  # same seed, same texts


@pytest.mark.parametrize(
    ("part", "where", "what"),
    [
        ('kind = "embeddings"\ninput_tokens = 5', "parts[0].inputs", "required key is missing"),
        ('kind = "embeddings"\ninputs = 2\ninput_tokens = 5\noutput = 3', "parts[0].output", "unknown key"),
        (
            'kind = "embeddings"\ninputs = 5000\ninput_tokens = 5',
            "parts[0].inputs",
            "expected at most 4096 items",
        ),
        (
            'kind = "rerank"\nquery_tokens = 0\ndocuments = 2\ndocument_tokens = 4',
            "parts[0].query_tokens",
            "at least 1",
        ),
        (
            'kind = "rerank"\nquery_tokens = 5\ndocuments = 2\ndocument_tokens = 4\ntop_n = 0',
            "parts[0].top_n",
            "",
        ),
        (
            'kind = "audio"\ninput = 1',
            "parts[0].kind",
            "expected a request kind, one of chat, embeddings, rerank",
        ),
    ],
)
def test_errors_name_file_and_key(tmp_path, part, where, what):
    path = tmp_path / "bad.toml"
    path.write_text(HEAD + f'[[parts]]\nname = "p"\n{part}\n')
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert str(err.value).startswith(f"{path}: {where}: ") and what in str(err.value)


RAG = (
    HEAD
    + """
[rag]
count = 4
query_tokens = 8
documents = {dist = "uniform", low = 3, high = 9}
document_tokens = 20
top_k = 2
output_tokens = 16
"""
)


def test_rag_iterations_are_three_turn_sessions_of_three_kinds(tmp_path):
    path = tmp_path / "rag.toml"
    path.write_text(RAG)
    sessions = items(path)
    assert len(sessions) == 4
    for s in sessions:
        turns = []
        while (r := s.next_request(None, True)) is not None:
            turns.append(r)
        embed, rerank, chat = turns
        assert {r.session_id for r in turns} == {s.session_id} and [r.turn for r in turns] == [1, 2, 3]
        assert (embed.kind, rerank.kind, chat.kind) == ("embeddings", "rerank", "chat")
        assert embed.inputs == [rerank.query] and rerank.top_n == 2
        prompt = chat.messages[0]["content"]
        # the top-k documents reranked, then the same query
        assert prompt == "\n\n".join([*rerank.documents[:2], rerank.query])
        assert chat.n_in_target == 2 * 20 + 8 and chat.max_tokens == 16
        assert s.next_request(None, True) is None and s.status == "completed"


def test_rag_failed_turn_breaks_the_iteration(tmp_path):
    path = tmp_path / "rag.toml"
    path.write_text(RAG)
    s = items(path)[0]
    assert s.next_request(None, True).kind == "embeddings"
    assert s.next_request(None, False, "http_error") is None and s.status == "broken"


class Transcribe:
    """A plugin kind as docs/writing-a-plugin.md shows one: its keys and its build function."""

    @staticmethod
    def build(table, rng):
        from loadkit.types import GenerationRequest

        seconds = rng.uniform(1.0, float(table["max_seconds"]))
        return GenerationRequest(max_tokens=0, kind_fields={"seconds": round(seconds, 3)}, n_items=1)

    @hookimpl
    def loadkit_register_kinds(self, register):
        from loadkit.core.kinds import RequestKind

        register(
            RequestKind("transcribe", streaming=False, item="clip", keys=("max_seconds",), build=self.build)
        )


@pytest.fixture
def with_plugin_kind(monkeypatch):
    import loadkit.plugins as plugins

    pm = plugins.new_plugin_manager(load_entry_points=False)
    pm.register(Transcribe(), name="transcribe-plugin")
    monkeypatch.setattr(plugins, "get_plugin_manager", lambda: pm)
    return pm


def test_a_plugin_kind_is_built_by_its_own_function(tmp_path, with_plugin_kind):
    path = tmp_path / "plug.toml"
    path.write_text(HEAD + '[[parts]]\nname = "asr"\nkind = "transcribe"\nmax_seconds = 30\n'
                    '[[parts]]\nname = "chat"\ninput = 4\noutput = 2\n')  # fmt: skip
    assert load_scenario(path).kinds == ("transcribe", "chat")
    reqs = [r for r in items(path) if r.kind == "transcribe"]
    assert reqs and all(r.label == "asr" and 1.0 <= r.kind_fields["seconds"] <= 30.0 for r in reqs)
    assert [r.kind_fields for r in reqs] == [r.kind_fields for r in items(path) if r.kind == "transcribe"]
    path.write_text(HEAD + '[[parts]]\nname = "asr"\nkind = "transcribe"\nmax_second = 30\n')
    with pytest.raises(
        ScenarioError, match=r"parts\[0\]\.max_second: unknown key \(did you mean 'max_seconds'\?\)"
    ):
        load_scenario(path)


def test_tenants_share_parts_of_several_kinds_with_their_own_latency_slos(tmp_path):
    path = tmp_path / "tenants.toml"
    path.write_text(
        MIX + '[[tenants]]\nname = "search"\nparts = ["emb", "rr"]\nslos = { latency_ms = 80, latency_per_item_ms = 5 }\n'
        '[[tenants]]\nname = "chatters"\nparts = ["chat"]\nslos = { ttft_ms = 300 }\n'
    )  # fmt: skip
    sc = load_scenario(path)
    assert dict(sc.tenants[0].slos) == {"latency_ms": 80.0, "latency_per_item_ms": 5.0}
    reqs = items(path)
    by_tenant = {(r.label.split("/")[0], r.kind) for r in reqs}
    assert by_tenant == {("search", "embeddings"), ("search", "rerank"), ("chatters", "chat")}
