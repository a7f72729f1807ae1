"""Session, stage, length and user-class stats across Locust nodes: workers piggyback a cumulative snapshot on
every stats report (`report_to_master`), the master keeps the newest per worker and merges on
demand.

Cumulative snapshots make a lost or cleared interval harmless; a sequence number makes an
older one arriving late harmless too.
"""

from __future__ import annotations

import logging
from typing import Any

from loadkit.classstats import ClassStats
from loadkit.delivered import SCHEDULED, DeliveredLoad
from loadkit.lengthstats import LengthStats
from loadkit.records import RequestRecord
from loadkit.sessionstats import SessionStats
from loadkit.stagestats import StageStats
from loadkit.stats.aggregate import Slo
from loadkit.tenantstats import TenantStats

log = logging.getLogger("loadkit")
KEY = "loadkit_side"


class SideStats:
    """This node's session and stage stats, and (on the master) the workers' latest."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.local = SessionStats()
        self.stages = StageStats()
        self.lengths = LengthStats()
        self.classes = ClassStats()
        self.delivered = DeliveredLoad()  # send/end times per target and stage (delivered.py)
        self.realised: dict[str, Any] = {}  # this node's workload sources' own summaries
        self.remote: dict[str, tuple[int, SessionStats, StageStats, LengthStats, dict[str, Any], ClassStats]] = {}
        self.remote_delivered: dict[str, DeliveredLoad] = {}
        self.tenants = TenantStats()  # per-tenant cells, when the scenario declares tenants
        self.remote_tenants: dict[str, TenantStats] = {}
        self._slo_scenario: Any = None  # the scenario _own_slos was taken from
        self._own_slos: dict[str, dict[str, float]] = {}
        self.seq = 0
        self.plan: list[dict[str, Any]] = []
        self.asked: dict[str, Any] | None = None  # the scenario's length spec, as written

    def install(self) -> None:
        from locust.runners import MasterRunner, WorkerRunner

        events = self.environment.events
        runner = self.environment.runner
        events.test_start.add_listener(lambda **_: self.reset())
        if isinstance(runner, WorkerRunner):
            events.report_to_master.add_listener(self.on_report_to_master)
        else:
            events.reset_stats.add_listener(self.reset)
        if isinstance(runner, MasterRunner):
            events.worker_report.add_listener(self.on_worker_report)

    def reset(self, **_: Any) -> None:
        self.local = SessionStats()
        self.stages = StageStats(self.stages.slos)
        self.lengths = LengthStats()
        self.classes = ClassStats(self.classes.slos)
        self.delivered = DeliveredLoad()
        self.tenants = TenantStats()
        self.remote.clear()
        self.remote_delivered.clear()
        self.remote_tenants.clear()

    def set_slos(self, slos: dict[str, float]) -> None:
        self.stages.slos = dict(slos)
        self.classes.slos = tuple(Slo(key, limit) for key, limit in slos.items())

    def add_turn(self, record: RequestRecord) -> None:
        self.local.add_turn(record)

    def add_staged(self, record: RequestRecord) -> None:
        self.stages.add(record)

    def add_lengths(self, record: RequestRecord) -> None:
        self.lengths.add(record)
        self.delivered.add(record)
        self.tenants.add(record, self.stages.slos, self._tenant_slos())

    def add_class(self, record: RequestRecord) -> None:
        self.classes.add(record)

    def add_session(self, engine: str, session: Any) -> None:
        self.local.add_session(
            engine,
            session.status,
            session.turns_sent,
            session.broken_reason,
            getattr(session, "end_reason", None),
        )

    def on_report_to_master(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        self.seq += 1
        data[KEY] = {"seq": self.seq, "sessions": self.local.to_wire(), "stages": self.stages.to_wire(),
                     "lengths": self.lengths.to_wire(), "realised": self.realised,
                     "classes": self.classes.to_wire(),
                     "delivered": self.delivered.to_wire(), "tenants": self.tenants.to_wire()}  # fmt: skip

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(KEY)
        if payload is None:
            return
        seq = int(payload["seq"])
        held = self.remote.get(client_id)
        if held is not None and held[0] >= seq:
            return  # an older snapshot arriving late
        try:
            sessions = SessionStats.from_wire(payload["sessions"])
            stages = StageStats.from_wire(payload["stages"])
            lengths = LengthStats.from_wire(payload["lengths"])
            classes = ClassStats.from_wire(payload["classes"]) if "classes" in payload else ClassStats()
            delivered = DeliveredLoad.from_wire(payload.get("delivered") or [])
            tenants = TenantStats.from_wire(payload.get("tenants") or {})
        except (KeyError, ValueError, TypeError) as exc:
            log.error("loadkit: bad session/stage stats from worker %s: %s", client_id, exc)
            return
        self.remote[client_id] = (seq, sessions, stages, lengths, dict(payload.get("realised") or {}), classes)
        self.remote_delivered[client_id] = delivered
        self.remote_tenants[client_id] = tenants

    def sessions_report(self) -> dict[str, Any]:
        merged = SessionStats()
        merged.merge(self.local)
        for _, sessions, *_ in self.remote.values():
            merged.merge(sessions)
        return merged.report()

    def stages_report(self) -> dict[str, Any]:
        merged = StageStats()
        merged.merge(self.stages)
        for _, _, stages, *_ in self.remote.values():
            merged.merge(stages)
        return merged.report(self.plan)

    def lengths_report(self) -> dict[str, Any]:
        merged = LengthStats()
        merged.merge(self.lengths)
        realised = [self.realised] if self.realised else []
        for _, _, _, lengths, real, _ in self.remote.values():
            merged.merge(lengths)
            if real:
                realised.append(real)
        return {"asked": self.asked, "by_target": merged.report(), "workload_sources": realised}

    def classes_report(self) -> dict[str, Any]:
        merged = ClassStats(self.classes.slos)
        merged.merge(self.classes)
        for *_, classes in self.remote.values():
            merged.merge(classes)
        return merged.report()

    def delivered_report(self) -> dict[str, Any]:
        """Asked vs realised arrivals per target and stage (delivered.py), all nodes merged."""
        merged = DeliveredLoad()
        merged.merge(self.delivered)
        for delivered in self.remote_delivered.values():
            merged.merge(delivered)
        runtime = getattr(self.environment, "loadkit", None)
        scenario = getattr(runtime, "scenario", None)
        arrival = getattr(scenario, "arrival", None)
        offsets = None
        if arrival and arrival.get("model") in SCHEDULED and runtime is not None and runtime.sources:
            offsets = next(iter(runtime.sources.values())).trace_arrival_times_s()
        return merged.report(arrival, offsets, self.lengths_report()["by_target"])

    def tenants_report(self) -> dict[str, Any] | None:
        """Per-tenant goodput, SLO attainment and fairness (tenantstats.py); None without tenants."""
        runtime = getattr(self.environment, "loadkit", None)
        declared = getattr(getattr(runtime, "scenario", None), "tenants", None) or []
        if not declared:
            return None
        merged = TenantStats()
        merged.merge(self.tenants)
        for tenants in self.remote_tenants.values():
            merged.merge(tenants)
        run_slos = dict(self.stages.slos)
        return merged.report({t.name: t.priority for t in declared},
                             {t.name: {"slos": run_slos if t.slos is None else dict(t.slos),
                                       "slos_from": "run" if t.slos is None else "tenant",
                                       "arrival_asked": t.arrival} for t in declared})

    def _tenant_slos(self) -> dict[str, dict[str, float]]:
        """The declared tenants' own SLO tables, kept per scenario object (looked up per request)."""
        scenario = getattr(getattr(self.environment, "loadkit", None), "scenario", None)
        if scenario is not self._slo_scenario:
            tenants = getattr(scenario, "tenants", None) or []
            self._slo_scenario = scenario
            self._own_slos = {t.name: t.slos for t in tenants if t.slos is not None}
        return self._own_slos
