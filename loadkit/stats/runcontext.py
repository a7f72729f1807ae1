"""The run's context the built-in sections need beyond the records: frozen, handed over by the
run set-up at configure (locust/runtime.py ``Runtime.run_context``), so the stats never reach
back into the runtime (stats/builtin.py used to look it up through the Locust environment,
once per record)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from loadkit.stats.metrics import compile_slos


def _closed(target: str, classes: list[str]) -> dict[str, Any]:
    return {"arrival": {"model": "closed"}}


@dataclass(frozen=True, slots=True)
class RunContext:
    """What one configured run tells its stats sections."""

    # The stage plan (stats/stagestats.py stage_plan). Not copied: a locustfile's load shape
    # adds its steps as they happen (locust/shapesteps.py), and the report shows every one.
    plan: Sequence[dict[str, Any]] = ()
    # Records count in the stage table: a run with stages, a shape or a warm-up. True without
    # a run set-up (the stats alone): every record that names a stage counts.
    staged: bool = True
    shaped: bool = False  # a locustfile's load shape sets the users of each stage
    asked_lengths: dict[str, Any] | None = None  # the scenario's length spec, as written
    tenants: tuple[Any, ...] = ()  # the scenario's declared tenants (name, priority, slos, arrival)
    # Each declared tenant's own SLO table, compiled once (looked up per request).
    tenant_slos: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # The asked context of a target and the classes that sent to it (stats/askedcontext.py):
    # asked when the delivered section is reported, when the schedule's end is known.
    asked_for: Callable[[str, list[str]], dict[str, Any]] = _closed

    @classmethod
    def of(cls, plan: list[dict[str, Any]], staged: bool, shaped: bool, asked_lengths: dict[str, Any] | None,
           tenants: list[Any], asked_for: Callable[[str, list[str]], dict[str, Any]]) -> RunContext:  # fmt: skip
        """A context with the tenants' SLOs compiled."""
        own = {t.name: compile_slos(t.slos) for t in tenants if t.slos is not None}
        return cls(plan, staged, shaped, asked_lengths, tuple(tenants), MappingProxyType(own), asked_for)
