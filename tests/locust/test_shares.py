"""Dealing each open-loop scenario among the workers that run its users."""

from __future__ import annotations

from types import SimpleNamespace

from loadkit.locust.shares import deal_shares, summary


class Chat:
    pass


class Agent:
    pass


def workload(label, *classes):
    return SimpleNamespace(label=label, classes=list(classes))


def test_a_scenario_is_dealt_among_the_workers_running_its_classes_only():
    counts = {"w0": {"Chat": 3, "Agent": 0}, "w1": {"Chat": 0, "Agent": 2}, "w2": {"Chat": 1, "Agent": 1}}
    dealt = deal_shares([workload("chat", Chat), workload("agent", Agent)], ["w0", "w1", "w2"], counts)
    assert dealt == {"w0": {"chat": [0, 2], "agent": None}, "w1": {"chat": None, "agent": [0, 2]},
                     "w2": {"chat": [1, 2], "agent": [1, 2]}}  # fmt: skip
    assert summary(dealt, 3) == {"chat": {"workers": 2, "of": 3}, "agent": {"workers": 2, "of": 3}}


def test_classes_sharing_a_scenario_count_together_and_unknown_counts_change_nothing():
    counts = {"w0": {"Chat": 1}, "w1": {"Agent": 1}}
    assert deal_shares([workload("both", Chat, Agent)], ["w0", "w1"], counts) == {
        "w0": {"both": [0, 2]}, "w1": {"both": [1, 2]}}  # fmt: skip
    # Nobody seems to run it (counts not in yet): workers keep the shares they took at start.
    assert deal_shares([workload("chat", Chat)], ["w0", "w1"], {}) == {"w0": {}, "w1": {}}


def test_a_worker_takes_its_shares_and_refuses_an_unknown_payload_loudly():
    from loadkit.locust.shares import take_shares

    got, invalid = [], []
    runtime = SimpleNamespace(
        schedules=SimpleNamespace(reshare=got.append), stats=SimpleNamespace(mark_invalid=invalid.append)
    )
    take_shares(runtime, {"v": 1, "shares": {"chat": [1, 2]}})
    assert got == [{"chat": [1, 2]}] and not invalid
    take_shares(runtime, {"v": 2, "shares": {}})
    take_shares(runtime, None)
    assert len(got) == 1 and len(invalid) == 2 and "unknown form" in invalid[0]
