"""The run's context the built-in sections need beyond the records: an immutable snapshot handed
over by the run set-up (locust/runtime.py ``Runtime.run_context``) at configure, and again when
the schedule starts or ends or a load shape begins a step, so the stats never reach back into
the runtime (stats/builtin.py used to look it up through the Locust environment, once per
record, and the asked context used to read the runtime when the report was built)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from loadkit.stats.metrics import compile_slos
from loadkit.stats.tiercontext import TierContext


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AskedWorkload:
    """What one workload of the run asks: the user classes sending it, its scenario's arrival
    and trace spec as written, and its request source per target (each asked for its trace's
    arrival offsets when the delivered section is reported)."""

    classes: tuple[str, ...] = ()
    arrival: Mapping[str, Any] | None = None
    trace: Any = None
    sources: Mapping[str, Any] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class AskedFacts:
    """The asked side of the delivered section (stats/askedcontext.py): the run's workloads, its
    main scenario's own (for classes no workload claims), and every user class of the run by
    name, with whether it sends a scenario (run/workloads.py SCENARIO_CLASS_FLAG)."""

    workloads: tuple[AskedWorkload, ...] = ()
    main: AskedWorkload | None = None
    class_sends_scenario: Mapping[str, bool] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class RunContext:
    """What one configured run tells its stats sections."""

    # The stage plan (stats/stagestats.py stage_plan); a locustfile's load shape adds its steps
    # as they happen (locust/shapesteps.py), and the runtime hands over a new context each time.
    plan: tuple[dict[str, Any], ...] = ()
    # Records count in the stage table: a run with stages, a shape or a warm-up. True without
    # a run set-up (the stats alone): every record that names a stage counts.
    staged: bool = True
    shaped: bool = False  # a locustfile's load shape sets the users of each stage
    asked_lengths: dict[str, Any] | None = None  # the scenario's length spec, as written
    tenants: tuple[Any, ...] = ()  # the scenario's declared tenants (name, priority, slos, arrival)
    # Each declared tenant's own SLO table, compiled once (looked up per request).
    tenant_slos: Mapping[str, Any] = field(default_factory=_empty)
    # The asked side of the delivered section; None without a run set-up (every target closed).
    asked: AskedFacts | None = None
    # How long the open-loop schedule ran (Schedules.schedule_span_s), as the runtime last said.
    covered_s: float | None = None
    # The SLO tiers and each target's GPU-hour price (run/costtiers.py; docs/cost.md).
    tiers: TierContext = field(default_factory=lambda: TierContext())

    @classmethod
    def of(cls, plan: list[dict[str, Any]], staged: bool, shaped: bool, asked_lengths: dict[str, Any] | None,
           tenants: list[Any], asked: AskedFacts | None, covered_s: float | None) -> RunContext:  # fmt: skip
        """A context with the tenants' SLOs compiled."""
        own = {t.name: compile_slos(t.slos) for t in tenants if t.slos is not None}
        return cls(tuple(plan), staged, shaped, asked_lengths, tuple(tenants), MappingProxyType(own), asked,
                   covered_s)  # fmt: skip

    def asked_for(self, target: str, classes: list[str]) -> dict[str, Any]:
        """The asked context of a target and the classes that sent to it (stats/askedcontext.py)."""
        from loadkit.stats.askedcontext import asked_context

        return asked_context(self.asked, target, classes, self.covered_s)

    def with_(self, **changes: Any) -> RunContext:
        return replace(self, **changes)
