"""Shipped scenarios (the top-level scenarios/, package data in a wheel) are addressed by name from
any directory; the traces they replay are inside the package; ${LOADKIT_DATA} stays the user's
override for their own traces."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import loadkit
from loadkit.cli import main as loadkit_main
from loadkit.workload import ScenarioError, load_scenario
from loadkit.workload.paths import PACKAGE_DATA
from loadkit.workload.shipped import SHIPPED_DIR, find_scenario, shipped_scenarios

PACKAGE = Path(loadkit.__file__).resolve().parent
SHIPPED = shipped_scenarios()


def test_shipped_scenarios_live_at_the_top_of_the_checkout():
    # One copy, the repository's scenarios/; a wheel carries it as loadkit/scenarios/ (setup.py,
    # checked by tests/test_self_contained.py and scripts/check_wheel.sh).
    assert SHIPPED_DIR == PACKAGE.parent / "scenarios"
    assert not (PACKAGE / "scenarios").exists()
    assert {"uneven_chat", "mooncake_replay", "azure_conversation_replay", "agent-multiturn"} <= set(SHIPPED)
    assert all(p.parent == SHIPPED_DIR for p in SHIPPED.values())


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_name_resolves_from_another_directory(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_scenario(name) == SHIPPED[name]
    # The scenario's own name (hyphens) and the file name work too.
    assert find_scenario(name.replace("_", "-")) == SHIPPED[name]
    assert find_scenario(name.replace("-", "_") + ".toml") == SHIPPED[name]


def test_a_path_still_works_and_a_local_file_wins_over_a_shipped_name(tmp_path, monkeypatch, write_scenario):
    local = write_scenario('[[parts]]\nname = "p"\ninput = 10\noutput = 5\n', name="uneven_chat.toml")
    monkeypatch.chdir(local.parent)
    assert load_scenario(str(local)).path == local
    assert load_scenario("uneven_chat.toml").name == "t"  # the local file, not the shipped one
    assert load_scenario("uneven_chat").name == "uneven-chat"  # no such file here: the shipped one


def test_an_unknown_name_is_refused_with_the_shipped_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError) as err:
        load_scenario("uneven_chatt")
    text = str(err.value)
    assert text.startswith("uneven_chatt: no such file, and no shipped scenario of that name")
    assert "did you mean 'uneven_chat'?" in text and "mooncake_replay" in text
    # A path with a directory is a path: reading it says what is wrong.
    with pytest.raises(ScenarioError, match="cannot read file"):
        load_scenario("some/dir/uneven_chat.toml")


def test_scenarios_list_shows_every_shipped_scenario_on_one_line(capsys):
    assert loadkit_main(["scenarios", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SHIPPED)
    for line, (name, path) in zip(lines, SHIPPED.items(), strict=True):
        description = tomllib.loads(path.read_text())["description"]
        assert line.startswith(name + " ") and description in line
    assert any(
        line.startswith("mooncake_replay ") and "[mooncake trace replay, open loop]" in line for line in lines
    )
    assert any(line.startswith("agent-multiturn ") and "[sessions, closed loop]" in line for line in lines)


def test_scenarios_path_validate_and_show_take_names(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert loadkit_main(["scenarios", "path", "real_server"]) == 0
    assert capsys.readouterr().out.strip() == str(SHIPPED["real_server"])
    assert loadkit_main(["scenarios", "validate"]) == 0  # no arguments: every shipped scenario
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(SHIPPED) and all(line.startswith("ok: ") for line in out)
    assert loadkit_main(["scenarios", "show", "mooncake_replay", "-n", "2"]) == 0
    assert "mooncake-replay: trace" in capsys.readouterr().out
    assert loadkit_main(["scenarios", "path", "nope"]) == 2
    assert "no shipped scenario of that name" in capsys.readouterr().err


def _trace_paths(raw: dict) -> list[str]:
    found = []
    if isinstance(raw, dict):
        for key, value in raw.items():
            if key == "path" and isinstance(value, str):
                found.append(value)
            else:
                found += _trace_paths(value)
    elif isinstance(raw, list):
        for value in raw:
            found += _trace_paths(value)
    return found


def test_shipped_scenarios_read_packaged_traces_whatever_loadkit_data_says(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADKIT_DATA", str(tmp_path))  # a user's own (empty) data directory
    named = 0
    for path in SHIPPED.values():
        for raw in _trace_paths(tomllib.loads(path.read_text())):
            assert raw.startswith("${LOADKIT_PACKAGE_DATA}/traces/"), (path.name, raw)
            named += 1
        load_scenario(path).request_source().next_item()  # finds its trace: packaged, not the user's
    assert named >= 4


def test_loadkit_data_is_the_users_override_and_defaults_to_the_packaged_data(
    tmp_path, monkeypatch, write_scenario
):
    body = '[[parts]]\nname = "p"\njoint = { path = "${LOADKIT_DATA}/traces/mine.csv", input_column = "i", output_column = "o" }\n'
    scenario = write_scenario(body)
    mine = tmp_path / "data" / "traces" / "mine.csv"
    mine.parent.mkdir(parents=True)
    mine.write_text("i,o\n100,20\n200,30\n")
    monkeypatch.setenv("LOADKIT_DATA", str(tmp_path / "data"))
    item = load_scenario(scenario).request_source().next_item()
    assert (item.n_in_target, item.max_tokens) in ((100, 20), (200, 30))
    monkeypatch.setenv("LOADKIT_DATA", str(tmp_path / "elsewhere"))
    with pytest.raises(ScenarioError, match="LOADKIT_DATA is set to .*unset it to use the traces shipped"):
        load_scenario(scenario)
    # Unset: ${LOADKIT_DATA} is the packaged data, so a copy of a shipped path works as written.
    monkeypatch.delenv("LOADKIT_DATA")
    shipped_csv = "${LOADKIT_DATA}/traces/sharegpt-lengths/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
    copy = write_scenario(
        f'[[parts]]\nname = "p"\njoint = {{ path = "{shipped_csv}", '
        'input_column = "num_prefill_tokens", output_column = "num_decode_tokens" }\n',
        name="copy.toml",
    )
    assert load_scenario(copy).request_source().next_item() is not None
    assert (PACKAGE_DATA / "traces").is_dir() and PACKAGE_DATA.parent == PACKAGE


# -- references from user classes: resolve_scenario and scenario_tags (loadkit's user API) -------


def test_class_references_resolve_with_dash_underscore_or_suffix():
    from loadkit.workload.shipped import SHIPPED_DIR, resolve_scenario

    want = SHIPPED_DIR / "uneven_chat.toml"
    for ref in ("uneven-chat", "uneven_chat", "uneven_chat.toml"):
        assert resolve_scenario(ref) == want, ref
    assert resolve_scenario("agent-multiturn") == SHIPPED_DIR / "agent-multiturn.toml"


def test_an_existing_path_wins_and_the_locustfile_directory_is_tried(tmp_path, monkeypatch):
    from loadkit.workload.shipped import SHIPPED_DIR, resolve_scenario

    own = tmp_path / "agent-multiturn.toml"
    own.write_text("x")
    monkeypatch.chdir(tmp_path)
    assert resolve_scenario("agent-multiturn.toml") == own.relative_to(tmp_path)  # the file here, not shipped
    elsewhere = tmp_path / "lf"
    elsewhere.mkdir()
    (elsewhere / "mine.toml").write_text("x")
    monkeypatch.chdir(SHIPPED_DIR)
    assert resolve_scenario("mine.toml", base_dir=elsewhere) == elsewhere / "mine.toml"


def test_an_unknown_class_reference_names_the_shipped_ones():
    from loadkit.workload.shipped import UnknownScenario, resolve_scenario

    with pytest.raises(UnknownScenario, match=r"nosuch: no such file.*agent-multiturn"):
        resolve_scenario("nosuch")
    assert str(resolve_scenario("/nonexistent/x.toml")) == "/nonexistent/x.toml"  # the loader says why


def test_tags_name_the_scenario_by_reference_and_by_its_own_name(tmp_path):
    from loadkit.workload.shipped import scenario_tags

    assert scenario_tags("uneven_chat") == {"uneven_chat", "uneven-chat"}
    path = tmp_path / "rag_ctx.toml"
    path.write_text('name = "retrieval"\n')
    assert scenario_tags(str(path)) == {"rag_ctx", "rag-ctx", "retrieval"}
    assert scenario_tags(str(tmp_path / "missing.toml")) == {"missing"}  # unreadable now: told at start


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_scenario_fits_the_simulator_it_names(name):
    """Each request's prompt and output fit the context of the scenario's [sim] profile (the
    default profile's 8,192 tokens when it names none): no engine 400 against the simulator
    `loadkit run` starts for it. Sessions grow turn by turn; their caps are checked instead."""
    import itertools

    from loadkit.sim.config import PROFILES
    from loadkit.types import GenerationRequest

    scenario = load_scenario(name)
    context = PROFILES[scenario.sim_profile or "default"].max_model_len
    if scenario.sessions is not None:
        raw = scenario.raw["sessions"]
        assert raw["context"]["max_tokens"] + raw["output_tokens"]["max"] <= context
        return
    if scenario.trace is not None and scenario.trace.as_sessions:
        assert scenario.trace.max_input_tokens is not None
        assert scenario.trace.max_input_tokens + 2000 <= context  # the trace's longest output: 2,000
        return
    source = scenario.request_source()
    worst = 0
    for item in itertools.islice(iter(source.next_item, None), 3000):
        if scenario.rag is not None:  # a RAG iteration: its three requests, each checked
            requests = list(iter(lambda s=item: s.next_request(None, True), None))
        else:
            requests = [item]
        for req in requests:
            assert isinstance(req, GenerationRequest)
            worst = max(worst, _context_need(req))
    assert 0 < worst <= context, (worst, context)


def _context_need(req) -> int:
    """The context a request needs: a chat's prompt and output; an embedding's or a rerank's
    longest item (the context limit applies per input, per query + document; approx: a word a token)."""
    if req.kind == "embeddings":
        return max(len(t.split()) for t in req.inputs)
    if req.kind == "rerank":
        return len(req.query.split()) + max(len(t.split()) for t in req.documents)
    return (req.n_in_target or 0) + req.max_tokens


def test_the_sim_table_names_a_simulator_profile(write_scenario):
    body = '[[parts]]\nname = "p"\ninput = 10\noutput = 5\n'
    assert load_scenario(write_scenario(body + '[sim]\nprofile = "long"\n')).sim_profile == "long"
    assert load_scenario(write_scenario(body)).sim_profile is None
    with pytest.raises(
        ScenarioError,
        match=r"sim\.profile: expected one of 'default', 'fast', 'big', 'long', "
        r"got 'huge'",
    ):
        load_scenario(write_scenario(body + '[sim]\nprofile = "huge"\n'))
    with pytest.raises(ScenarioError, match=r"sim\.max_model_len: unknown key; allowed: profile"):
        load_scenario(write_scenario(body + '[sim]\nprofile = "long"\nmax_model_len = 4\n'))
