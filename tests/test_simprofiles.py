"""loadkit/simprofiles.py: the profile names a scenario may name are the simulator's profiles."""

from __future__ import annotations

import pytest

from loadkit.sim.config import PROFILES
from loadkit.simprofiles import PROFILE_NAMES
from loadkit.workload.errors import Ctx, ScenarioError
from loadkit.workload.scenario import _parse_sim


def test_the_names_are_the_simulators_profiles() -> None:
    assert tuple(PROFILES) == PROFILE_NAMES


def test_a_scenario_names_a_profile_by_these_names() -> None:
    assert _parse_sim(Ctx("s.toml", "sim"), {"profile": "long"}) == "long"
    with pytest.raises(ScenarioError, match="long"):
        _parse_sim(Ctx("s.toml", "sim"), {"profile": "huge"})
