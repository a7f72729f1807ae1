"""The delivered section's "asked" side is recomputed, not taken on trust (issue 31). Four real
runs against the simulator are kept gzipped in data/asked_runs (report.json, the raw log and,
where sessions ended, the session log):

- ``classes``: tests/integration/locustfiles/delivered_mixed.py, closed-loop agent-multiturn
  (2 users) on target ``agent`` and Poisson uneven_chat (4/s) on ``chat``, ``-t 5s``;
- ``shape``: delivered_shaped.py, the same two classes under a LoadTestShape of two steps
  (4, then 8 users);
- ``trace``: the shipped azure_conversation_replay cut by ``-t 14s`` (21 of its 2867 arrivals, 1.53/s);
- ``own_pace``: delivered_own_pace.py, an LLMUser pacing its own task (``constant_pacing``).

Each verifies as it is; each tampered "asked" (kept consistent with the row's rate_error, so
only the asked check can see it) makes ``loadkit verify`` exit 1 naming the row. Fast: no run.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadkit.verify.cli import main

DATA = Path(__file__).resolve().parent / "data" / "asked_runs"
REPO = Path(__file__).resolve().parents[2]
TRACE_SCENARIO = REPO / "scenarios" / "azure_conversation_replay.toml"


def _copy(tmp_path: Path, run: str, change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    out = tmp_path / run
    out.mkdir()
    doc = json.loads(gzip.decompress((DATA / run / "report.json.gz").read_bytes()))
    # The run's scenario file, where this checkout has it (the oracle reads a trace's from it).
    scenario = doc["manifest"].get("scenario") or {}
    if scenario.get("path"):
        scenario["path"] = str(REPO / "scenarios" / Path(scenario["path"]).name)
    if change is not None:
        change(doc)
    (out / "report.json").write_text(json.dumps(doc))
    (out / "requests.jsonl").write_bytes(gzip.decompress((DATA / run / "requests.jsonl.gz").read_bytes()))
    if (DATA / run / "sessions.jsonl.gz").is_file():
        (out / "sessions.jsonl").write_bytes(gzip.decompress((DATA / run / "sessions.jsonl.gz").read_bytes()))
    return out


def _row(doc: dict[str, Any], target: str, stage: str) -> dict[str, Any]:
    return doc["delivered"]["by_target"][target]["stages"][stage]


def _ask(doc: dict[str, Any], target: str, stage: str, asked: dict[str, Any]) -> None:
    """Replace a row's asked, and its rate_error to match (as a report built that way would)."""
    row = _row(doc, target, stage)
    row["asked"] = asked
    rate = asked.get("rate")
    row["rate_error"] = row["realised"]["rate"] / rate - 1.0 if rate and row["realised"]["rate"] else None


@pytest.mark.parametrize("run", ["classes", "shape", "trace", "own_pace"])
def test_the_real_runs_verify_with_their_asked_checked(tmp_path, capsys, run):
    assert main([str(_copy(tmp_path, run))]) == 0
    out = capsys.readouterr().out
    assert "DISAGREES" not in out and "checked delivered: " in out, out
    assert "asked of user classes with their own arrivals" not in out  # the old "not recomputed" note


def _whole_trace(doc: dict[str, Any]) -> None:
    """The report of issue 31's bug: a cut replay judged against the whole window's rate."""
    from loadkit.workload import load_scenario
    from loadkit.workload.arrival import realised_stats

    whole = realised_stats(load_scenario(TRACE_SCENARIO).request_source().trace_arrival_times_s())
    _ask(doc, "openai", "trace", {"model": "trace", "rate": whole["rate"], "cv": whole["cv"]})


def _agent_as_chat(doc: dict[str, Any]) -> None:
    """The closed-loop class judged against the other class's Poisson 4/s."""
    _ask(doc, "agent", "run", {"model": "poisson", "rate": 4.0, "cv": 1.0})
    doc["delivered"]["arrival_model"] = "poisson"


def _covered(doc: dict[str, Any]) -> None:
    _row(doc, "openai", "trace")["asked"]["covered_s"] = 600.0


def _own_as_closed(doc: dict[str, Any]) -> None:
    _ask(doc, "openai", "run", {"model": "closed", "rate": None, "cv": None, "users": 2})
    doc["delivered"]["arrival_model"] = "closed"


TAMPERED: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "classes: agent judged by chat's arrival": ("classes", _agent_as_chat),
    "classes: chat asked 8/s": ("classes", lambda d: _ask(d, "chat", "main", {"model": "poisson", "rate": 8.0, "cv": 1.0})),
    "classes: chat's row names the other class": ("classes", lambda d: _row(d, "chat", "main").update(user_classes=["Agent"])),
    "shape: step2 asked the first step's users": ("shape", lambda d: _row(d, "agent", "step2")["asked"].update(users=4)),
    "shape: a step judged as a ramp": ("shape", lambda d: _ask(d, "chat", "step1", {"model": "poisson", "rate": None, "cv": 1.0, "ramp": [4.0, 8.0], "users": 4})),
    "shape: a step of constant users as Poisson": ("shape", lambda d: _ask(d, "agent", "step1", {"model": "poisson", "rate": 4.0, "cv": 1.0, "users": 4})),
    "trace: the whole window's rate": ("trace", _whole_trace),
    "trace: covered_s of the whole window": ("trace", _covered),
    "own_pace: judged as closed loop": ("own_pace", _own_as_closed),
}  # fmt: skip
NAMED = {
    "classes: agent judged by chat's arrival": "delivered / agent / run / asked (closed loop at 8 users)",
    "classes: chat asked 8/s": "delivered / chat / main / asked (poisson 4.0/s)",
    "classes: chat's row names the other class": "delivered / chat / main / user_classes",
    "shape: step2 asked the first step's users": "delivered / agent / step2 / asked (closed loop at 8 users per stage)",
    "shape: a step judged as a ramp": "delivered / chat / step1 / asked (poisson 4.0/s, in a shape's step)",
    "shape: a step of constant users as Poisson": "delivered / agent / step1 / asked (closed loop at 4 users per stage)",
    "trace: the whole window's rate": "delivered / openai / trace / asked.rate (the reached part of the trace)",
    "trace: covered_s of the whole window": "delivered / openai / trace / the trace's arrivals up to asked.covered_s (sent + dropped, + at most 12 held at the stop)",
    "own_pace: judged as closed loop": "delivered / openai / run / asked (not asked: the pacing is the classes' own)",
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_asked_is_named(tmp_path, capsys, case):
    run, change = TAMPERED[case]
    assert main(["-q", str(_copy(tmp_path, run, change))]) == 1
    out = capsys.readouterr().out
    assert f"DISAGREES {NAMED[case]}: report" in out, out


def test_a_trace_the_oracle_cannot_read_is_said_not_checked(tmp_path, capsys):
    def elsewhere(doc: dict[str, Any]) -> None:
        doc["manifest"]["scenario"]["path"] = str(tmp_path / "gone.toml")

    assert main([str(_copy(tmp_path, "trace", elsewhere))]) == 0
    out = capsys.readouterr().out
    assert "not checked: delivered openai / trace asked (a trace's part) because the scenario file" in out, (
        out
    )
