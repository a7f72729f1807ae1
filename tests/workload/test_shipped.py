"""Scenario references: shipped names, paths, a base directory, and what is not a scenario."""

from __future__ import annotations

import pytest

from loadkit.workload.shipped import SHIPPED_DIR, UnknownScenario, resolve_scenario, scenario_tags


def test_shipped_names_resolve_with_dash_underscore_or_suffix():
    want = SHIPPED_DIR / "uneven_chat.toml"
    for ref in ("uneven-chat", "uneven_chat", "uneven_chat.toml"):
        assert resolve_scenario(ref) == want, ref
    assert resolve_scenario("agent-multiturn") == SHIPPED_DIR / "agent-multiturn.toml"


def test_an_existing_path_wins_and_a_base_directory_is_tried(tmp_path, monkeypatch):
    own = tmp_path / "agent-multiturn.toml"
    own.write_text("x")
    monkeypatch.chdir(tmp_path)
    assert resolve_scenario("agent-multiturn.toml") == own.relative_to(tmp_path)  # the file here, not shipped
    elsewhere = tmp_path / "lf"
    elsewhere.mkdir()
    (elsewhere / "mine.toml").write_text("x")
    monkeypatch.chdir(SHIPPED_DIR)
    assert resolve_scenario("mine.toml", base_dir=elsewhere) == elsewhere / "mine.toml"


def test_an_unknown_name_lists_the_shipped_ones_and_a_missing_path_is_left_to_the_loader():
    with pytest.raises(UnknownScenario, match=r"'nosuch' is neither a file nor a shipped scenario.*agent-multiturn"):
        resolve_scenario("nosuch")
    assert str(resolve_scenario("/nonexistent/x.toml")) == "/nonexistent/x.toml"
    for weird in ("\x00", "a" * 5000, "", "~nobody-here/x.toml"):
        try:
            resolve_scenario(weird)
        except UnknownScenario:
            pass


def test_tags_name_the_scenario_by_reference_and_by_its_own_name(tmp_path):
    assert scenario_tags("uneven_chat") == {"uneven_chat", "uneven-chat"}
    path = tmp_path / "rag_ctx.toml"
    path.write_text('name = "retrieval"\n')
    assert scenario_tags(str(path)) == {"rag_ctx", "rag-ctx", "retrieval"}
    assert scenario_tags(str(tmp_path / "missing.toml")) == {"missing"}  # unreadable now: told at start
