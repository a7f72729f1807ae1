"""Scenario files through loadkit.workload: per-turn lengths and planned prefix sharing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loadkit.capacity import CapacityError, lengths_from_scenario, read_lengths

PARTS = """
schema = "loadkit.scenario/1"
name = "cap-parts"
seed = 7
max_requests = 30

[[parts]]
name = "short"
input = 100
output = 20
"""

SESSIONS = """
schema = "loadkit.scenario/1"
name = "cap-sessions"
seed = 7

[sessions]
count = 4
turns = 3
user_tokens = 50
output_tokens = 20
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return path


def test_parts_scenario_lengths_and_request_cap(tmp_path: Path) -> None:
    path = _write(tmp_path, PARTS)
    assert read_lengths(path).lengths.tolist() == [120] * 30  # the scenario's own max_requests
    s = lengths_from_scenario(path, 10)
    assert s.kind == "scenario" and s.lengths.tolist() == [120] * 10 and s.prefix is None


def test_session_turns_grow_and_share_their_history(tmp_path: Path) -> None:
    s = lengths_from_scenario(_write(tmp_path, SESSIONS), 1000)
    # turn k carries every earlier user message and reply: 50+20, then +70, then +70
    assert s.lengths.tolist() == [70, 140, 210] * 4
    assert s.prefix is not None
    # per session prompts 50 + 120 + 190 = 360; earlier turns (0 + 70 + 140) are a cached prefix
    assert (s.prefix.prompt_tokens, s.prefix.shared_tokens) == (4 * 360, 4 * 210)


def test_invalid_scenario_is_one_capacity_error(tmp_path: Path) -> None:
    path = _write(tmp_path, 'schema = "loadkit.scenario/1"\nname = "x"\n')
    with pytest.raises(CapacityError, match="scenario.toml"):
        lengths_from_scenario(path, 10)


def test_a_shipped_scenario_name_is_a_length_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no file of that name here: the shipped scenario (package data)
    s = read_lengths("azure_conversation_replay", 500)
    assert (
        s.kind == "scenario" and s.lengths.size == 500 and s.source.endswith("azure_conversation_replay.toml")
    )
    with pytest.raises(CapacityError, match="nor a shipped scenario's name"):
        read_lengths("azure_conversation_replayy")


def test_missing_workload_module_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "loadkit.workload", None)
    with pytest.raises(CapacityError, match="need loadkit.workload.load_scenario"):
        lengths_from_scenario(_write(tmp_path, PARTS), 10)
