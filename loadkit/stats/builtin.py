"""The built-in sections (stages, sessions, lengths, user classes, delivered load, tenants, task
errors, adapter errors, the open-loop schedules' counts) and the one place they subscribe to the
records: ``BuiltinSections.install``.

Each is a section of the node's StatsCollector (stats/sections.py), so it travels to the master
in the main snapshot protocol (cumulative, versioned, epochs, final handshake, lost workers
counted) and resets with the rest. What the reports need beyond the records (the stage plan,
the asked lengths, the scenario's arrival and tenants) is the run's frozen RunContext
(stats/runcontext.py), handed over by the runtime at configure; the workload sources' summaries
come at test stop (``realised``).
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.adaptererrors import AdapterErrors
from loadkit.stats.classstats import ClassStats
from loadkit.stats.collector import StatsCollector
from loadkit.stats.delivered import DeliveredLoad
from loadkit.stats.imagestats import ImageStats
from loadkit.stats.lengthstats import LengthStats
from loadkit.stats.rawlog import session_line
from loadkit.stats.runcontext import RunContext
from loadkit.stats.scheduletally import ScheduleTally
from loadkit.stats.sections import Section
from loadkit.stats.sessionstats import SessionStats
from loadkit.stats.stagestats import StageStats
from loadkit.stats.taskerrors import TaskErrors
from loadkit.stats.tenantstats import TenantStats
from loadkit.stats.tiersection import install_tier_sections


class NodeNotes:
    """Per-node summaries kept side by side (the workload sources' own ``realised()``)."""

    def __init__(self, notes: list[dict[str, Any]] | None = None) -> None:
        self.notes = [n for n in notes or [] if n]

    def merge(self, other: NodeNotes) -> None:
        self.notes += other.notes

    def to_wire(self) -> list[dict[str, Any]]:
        return list(self.notes)

    @classmethod
    def from_wire(cls, data: list[dict[str, Any]]) -> NodeNotes:
        return cls([dict(n) for n in data])


class BuiltinSections:
    """Registers the built-in sections on ``collector`` and holds the context their reports use."""

    def __init__(self, collector: StatsCollector, context: RunContext | None = None) -> None:
        self.collector = collector
        self.context = context if context is not None else RunContext()

    def install(self) -> None:
        """The one registration point: order here is the report's section order."""
        c = self.collector
        for section in (
            Section("sessions", SessionStats, SessionStats.from_wire, _add_turn, report=SessionStats.report),
            Section("stages", lambda: StageStats(c.slo_limits), StageStats.from_wire, self._add_staged,
                    warmup=True, report=lambda s: s.report(list(self.context.plan), self.context.tiers.attainment_target)),
            Section("lengths", LengthStats, LengthStats.from_wire, LengthStats.add, report=self._lengths_report),
            Section("realised", NodeNotes, NodeNotes.from_wire),
            Section("user_classes", lambda: ClassStats(c.slos), ClassStats.from_wire, ClassStats.add,
                    report=ClassStats.report),
            Section("delivered", DeliveredLoad, DeliveredLoad.from_wire, DeliveredLoad.add,
                    report=self._delivered_report),
            Section("tenants", TenantStats, TenantStats.from_wire, lambda s, r: s.add(r, c.compiled_slos, self.context.tenant_slos),
                    report=self._tenants_report),
            # Fed by Locust's user_error event (locust/taskerrors.py), not by the records.
            Section("task_errors", TaskErrors, TaskErrors.from_wire, report=TaskErrors.report),
            Section("adapter_errors", AdapterErrors, AdapterErrors.from_wire, AdapterErrors.add,
                    report=AdapterErrors.report),
            Section("images", ImageStats, ImageStats.from_wire, ImageStats.add, report=ImageStats.report),
            # Set at test stop by each process holding schedules; the manifest's "schedule".
            Section("schedule", ScheduleTally, ScheduleTally.from_wire),
        ):  # fmt: skip
            c.register_section(section)
        c.manifest_providers["schedule"] = self._schedule_manifest
        install_tier_sections(c, lambda: self.context)  # stats/tiersection.py: slo_tiers, cost

    # -- what the runtime tells the sections ----------------------------------------------

    def configure(self, context: RunContext, slos: Any) -> None:
        """A configured run: its context, and its SLOs, which reach every section through the
        collector (its one entry point)."""
        self.context = context
        self.collector.set_slos(slos)

    @property
    def realised(self) -> dict[str, Any]:
        notes = self.collector.section("realised").notes
        return notes[0] if notes else {}

    @realised.setter
    def realised(self, summaries: dict[str, Any]) -> None:
        """This node's workload sources' own summaries (set at test stop, before the final snapshot)."""
        self.collector.section_states["realised"] = NodeNotes([summaries])

    @property
    def schedule(self) -> ScheduleTally:
        return self.collector.section("schedule")

    @schedule.setter
    def schedule(self, tally: ScheduleTally) -> None:
        """This node's open-loop schedules' counts (set at test stop, before the final snapshot)."""
        self.collector.section_states["schedule"] = tally

    def _schedule_manifest(self) -> dict[str, Any] | None:
        """The schedules' counts summed over every node that holds one; None until they are
        known, or when a worker's final counts are missing (one lost before its stop): a
        partial sum would read as a schedule that reached less than it did."""
        c = self.collector
        remote = [node.sections.get("schedule") for node in c.remote.snapshots()]
        if c.remote.lost() or any(t is None or not t.nodes for t in remote):
            return None
        merged = c.merged_section("schedule")
        return merged.summary() if merged.nodes else None

    def add_session(self, engine: str, session: Any) -> None:
        """A session (scenario or Conversation) ended on this node. A Conversation says at
        which turn it broke (``broken_at_turn``); a scenario session broke at its last turn made."""
        at_turn = getattr(session, "broken_at_turn", None) or session.turns_sent
        self.collector.section("sessions").add_session(
            engine, session.status, at_turn, session.broken_reason, getattr(session, "end_reason", None)
        )
        if self.collector.raw_log is not None:  # the session log beside the raw log (rawlog.py)
            self.collector.raw_log.write_session(session_line(engine, session, at_turn))

    def add_task_error(self, user_class: str, exc: BaseException, tb: Any, wall_unix: float) -> None:
        """A task (or on_start) of a user of ``user_class`` raised ``exc`` on this node."""
        self.collector.section("task_errors").add(user_class, exc, tb, wall_unix)

    # -- feeds ----------------------------------------------------------------------------

    def _add_staged(self, stages: StageStats, record: RequestRecord) -> None:
        if self.context.staged:
            stages.add(record)

    # -- reports (over the state merged from every node) ----------------------------------

    def _lengths_report(self, lengths: LengthStats) -> dict[str, Any]:
        realised = self.collector.merged_section("realised").notes
        return {
            "asked": self.context.asked_lengths,
            "by_target": lengths.report(),
            "workload_sources": realised,
        }

    def _delivered_report(self, delivered: DeliveredLoad) -> dict[str, Any]:
        """Asked vs realised arrivals per target and stage (delivered.py), all nodes merged;
        each target judged by the arrival process of the classes that sent to it (asked.py)."""
        by_target = self.collector.merged_section("lengths").report()
        stage_users = None
        if self.context.shaped:
            stage_users = {
                str(s["name"]): int(s["level"]) for s in self.context.plan if s.get("level_kind") == "users"
            }
        return delivered.report(self.context.asked_for, by_target, stage_users)

    def _tenants_report(self, tenants: TenantStats) -> dict[str, Any] | None:
        """Per-tenant goodput, SLO attainment and fairness (tenantstats.py); None without tenants."""
        declared = self.context.tenants
        if not declared:
            return None
        run_slos = dict(self.collector.slo_limits)
        return tenants.report(
            {t.name: t.priority for t in declared},
            {
                t.name: {
                    "slos": run_slos if t.slos is None else dict(t.slos),
                    "slos_from": "run" if t.slos is None else "tenant",
                    "arrival_asked": t.arrival,
                }
                for t in declared
            },
        )


def _add_turn(sessions: SessionStats, record: RequestRecord) -> None:
    if record.turn is not None:
        sessions.add_turn(record)
