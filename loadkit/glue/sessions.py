"""Session stats across Locust nodes: workers piggyback a cumulative snapshot on every stats
report (`report_to_master`), the master keeps the newest per worker and merges on demand.

Cumulative snapshots make a lost or cleared interval harmless; a sequence number makes an
older one arriving late harmless too.
"""

from __future__ import annotations

import logging
from typing import Any

from loadkit.records import RequestRecord
from loadkit.sessionstats import SessionStats

log = logging.getLogger("loadkit")
KEY = "loadkit_sessions"


class SessionGlue:
    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.local = SessionStats()
        self.remote: dict[str, tuple[int, SessionStats]] = {}
        self.seq = 0

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
        self.remote.clear()

    def add_turn(self, record: RequestRecord) -> None:
        self.local.add_turn(record)

    def add_session(self, engine: str, session: Any) -> None:
        self.local.add_session(
            engine, session.status, session.turns_sent, session.broken_reason, getattr(session, "end_reason", None)
        )

    def on_report_to_master(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        self.seq += 1
        data[KEY] = {"seq": self.seq, "stats": self.local.to_wire()}

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        payload = data.get(KEY)
        if payload is None:
            return
        seq = int(payload["seq"])
        held = self.remote.get(client_id)
        if held is not None and held[0] >= seq:
            return  # an older snapshot arriving late
        try:
            self.remote[client_id] = (seq, SessionStats.from_wire(payload["stats"]))
        except (KeyError, ValueError, TypeError) as exc:
            log.error("loadkit: bad session stats from worker %s: %s", client_id, exc)

    def report(self) -> dict[str, Any]:
        merged = SessionStats()
        merged.merge(self.local)
        for _, stats in self.remote.values():
            merged.merge(stats)
        return merged.report()
