"""The asked context is built from the run's snapshot (RunContext.asked), never the runtime."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from loadkit.stats.askedcontext import asked_context
from loadkit.stats.runcontext import AskedFacts, AskedWorkload, RunContext


class TraceSource:
    def trace_arrival_times_s(self) -> list[float]:
        return [0.0, 1.0, 2.0, 3.0]

    def trace_arrival_stages(self) -> list[str]:
        return ["warmup", "main", "main", "main"]


TRACE = AskedWorkload(("Replay",), {"model": "trace"}, None, MappingProxyType({"fast": TraceSource()}))
POISSON = AskedWorkload(("Open",), {"model": "poisson", "rate": 2.0})
FACTS = AskedFacts((TRACE, POISSON), None, MappingProxyType({"Replay": True, "Open": True, "Own": False}))


def test_without_a_run_set_up_every_target_is_closed():
    assert RunContext().asked_for("fast", ["Any"]) == {"arrival": {"model": "closed"}}


def test_a_trace_is_asked_without_its_warmup_and_cut_to_the_span_passed_in():
    context = RunContext(asked=FACTS, covered_s=2.5)
    assert context.asked_for("fast", ["Replay"]) == {
        "arrival": {"model": "trace"},
        "offsets": [1.0, 2.0, 3.0],
        "covered_s": 2.5,
    }
    assert "covered_s" not in asked_context(FACTS, "fast", ["Replay"], None)


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        (["Open"], {"arrival": {"model": "poisson", "rate": 2.0}}),
        (["Own"], {"not_asked": "user class Own paces its own tasks (wait_time, its own calls)"}),
    ],
)
def test_each_class_is_judged_by_its_own_workload(classes, expected):
    assert asked_context(FACTS, "fast", classes) == expected


def test_classes_of_different_workloads_on_one_target_superpose():
    assert "superpose" in asked_context(FACTS, "fast", ["Open", "Replay"])["not_asked"]


def test_the_context_is_a_snapshot():
    context = RunContext.of([{"name": "s1"}], True, False, None, [], FACTS, None)
    assert isinstance(context.plan, tuple)
    with pytest.raises(AttributeError):
        context.covered_s = 1.0  # type: ignore[misc]
    assert context.with_(covered_s=1.0).covered_s == 1.0 and context.covered_s is None
