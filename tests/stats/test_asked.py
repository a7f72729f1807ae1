"""What a closed loop asked of a stage (loadkit/stats/asked.py): a load shape's step level, each
stage's own users in a closed stage plan, else the scenario's [arrival] users."""

from __future__ import annotations

from loadkit.stats.asked import asked_for

SWEEP = {
    "model": "closed",
    "users": 2,
    "stages": [{"duration_s": 3, "users": 2}, {"duration_s": 3, "users": 8}],
}


def test_each_stage_of_a_closed_stage_plan_asks_its_own_users():
    asked = asked_for({"arrival": SWEEP}, "stage2")
    assert asked == {"model": "closed", "rate": None, "cv": None, "users": 8, "stage_kind": "constant users"}
    assert asked_for({"arrival": SWEEP}, "stage1")["users"] == 2


def test_a_shape_step_and_a_plain_closed_loop():
    assert asked_for({"arrival": SWEEP, "users": 5}, "step1")["users"] == 5  # the shape's level wins
    plain = asked_for({"arrival": {"model": "closed", "users": 3}}, "run")
    assert plain == {"model": "closed", "rate": None, "cv": None, "users": 3}
