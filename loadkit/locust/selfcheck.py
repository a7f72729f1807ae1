"""The self-check in a Locust run: the probe (``loadkit/selfcheck/probe.py``) runs on gevent's
loop and reports into the stats collector the caller hands over; it starts at every test start
on nodes that send traffic (local, worker), never on a master."""

from __future__ import annotations

from typing import Any

import gevent

from loadkit.selfcheck.probe import LogOnlyStats, SelfCheck
from loadkit.selfcheck.verdict import SelfCheckConfig


def node_name(environment: Any) -> str:
    """``worker N`` on a worker, ``local`` otherwise (the self-check's manifest field)."""
    runner = getattr(environment, "runner", None)
    index = getattr(runner, "worker_index", None)
    kind = type(runner).__name__ if runner is not None else ""
    return f"worker {index}" if "Worker" in kind and index is not None else "local"


def install(environment: Any, stats: Any, config: SelfCheckConfig | None = None) -> None:
    """Wire the self-check into a Locust environment: call once at ``init`` with this process's
    stats collector (``warn``, ``set_manifest_fields``), or None to log its warnings instead."""
    holder: dict[str, SelfCheck] = {}
    sink = stats if stats is not None else LogOnlyStats()

    def on_test_start(**_kw: Any) -> None:
        if "Master" in type(environment.runner).__name__:
            return
        check = holder.get("check")
        if check is None:  # made at the first start: a worker knows its index by then
            check = holder["check"] = SelfCheck(sink, config, node_name(environment),
                                                spawn=gevent.spawn, sleep=gevent.sleep)  # fmt: skip
        check.start()

    def on_test_stop(**_kw: Any) -> None:
        check = holder.get("check")
        if check is not None:
            check.stop()

    environment.events.test_start.add_listener(on_test_start)
    environment.events.test_stop.add_listener(on_test_stop)
