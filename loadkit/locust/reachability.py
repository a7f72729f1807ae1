"""When a target goes away during a run, and when it comes back: one console line each, and
the run's ``reachability`` record (report.json ``manifest.reachability``).

A target becomes *unreachable* with the first request that could not connect to it
(``connect_error``) while it was reachable, and *reachable again* with the first request sent
after that one which the server answered (a response head came, or the request succeeded).
Requests sent before it went away do not count as coming back: a stream cut by the server's
death ends after the first refused connection, and a kept-alive connection to the dead server
is no proof of life either.

Judged where requests finish (local, or each worker on its own requests, once per finished
request: nothing per stream event). A worker sends each change to the master, which prints and
records the target's changes as every node reports them: unreachable when the first node finds
it so, reachable again when the first node reaches it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from loadkit.locust.breaker import clock, error_key, wall
from loadkit.records import RequestRecord
from loadkit.types import CONNECT_ERROR, OK

log = logging.getLogger("loadkit")

MESSAGE = "loadkit_reachability"
UNREACHABLE = "unreachable"
REACHABLE = "reachable"
MAX_EVENTS = 200  # per target: a target that flaps all run long keeps its first changes


@dataclass(slots=True)
class Down:
    since_send_ns: int  # the refused request's send time: what comes back must be sent later


class Reachability:
    """This node's view of each target; ``observe`` returns a change, or None (most calls)."""

    def __init__(self) -> None:
        self.down: dict[str, Down] = {}

    def observe(self, record: RequestRecord) -> dict[str, Any] | None:
        down = self.down.get(record.engine)
        if record.outcome == CONNECT_ERROR:
            if down is not None:
                return None
            self.down[record.engine] = Down(record.t_send_ns)
            return {"target": record.engine, "event": UNREACHABLE, "t": wall(record.t_end_ns),
                    "error": error_key(record)}  # fmt: skip
        if down is None or record.t_send_ns <= down.since_send_ns:
            return None
        if record.outcome != OK and record.t_headers_ns is None:
            return None  # no answer from the server: not back yet
        del self.down[record.engine]
        return {"target": record.engine, "event": REACHABLE, "t": wall(record.t_end_ns)}


class Record:
    """On the node that prints and reports (local, master): each target's changes, in order."""

    def __init__(self) -> None:
        self.events: dict[str, list[dict[str, Any]]] = {}

    def add(self, change: dict[str, Any], worker: int | None = None) -> None:
        target = change["target"]
        events = self.events.setdefault(target, [])
        last = events[-1]["event"] if events else REACHABLE
        if change["event"] == last:
            return  # another worker saw the same change
        event: dict[str, Any] = {"event": change["event"], "t": round(change["t"], 3)}
        if change["event"] == UNREACHABLE:
            event["error"] = change.get("error")
            log.warning(
                "loadkit: target %r unreachable since %s (%s)", target, clock(change["t"]), event["error"]
            )
        else:
            event["after_s"] = round(change["t"] - events[-1]["t"], 1)
            log.warning("loadkit: target %r reachable again after %.1f s", target, event["after_s"])
        if worker is not None:
            event["worker"] = worker
        if len(events) < MAX_EVENTS:
            events.append(event)

    def manifest(self) -> dict[str, Any]:
        return {"reachability": {target: list(events) for target, events in self.events.items()}}


# -- glue (Locust is imported only here, and lazily) ----------------------------------------


def changed(environment: Any, runtime: Any, change: dict[str, Any]) -> None:
    """A change this node saw: recorded here (local), or sent to the master (worker)."""
    runner = getattr(environment, "runner", None)
    if runner is not None and _is_worker(runner):
        runner.send_message(MESSAGE, {**change, "worker": runner.worker_index})
        return
    runtime.reachability_record.add(change)


def _is_worker(runner: Any) -> bool:
    from locust.runners import WorkerRunner

    return isinstance(runner, WorkerRunner)


def install(environment: Any, runtime: Any) -> None:
    """Master: the workers' changes are recorded and printed here."""

    def handler(environment: Any, msg: Any, **_: Any) -> None:
        data = dict(msg.data or {})
        runtime.reachability_record.add(data, data.pop("worker", None))

    environment.runner.register_message(MESSAGE, handler)
