"""Open-loop shares dealt among the workers that run each scenario's users.

At test start every worker takes its share of each scenario by its place among all workers
(worker i of n: arrivals i, i + n, ...). But Locust deals users to workers by class: with two
classes over two workers, each worker may run only one of them, and a worker without users of
a class cannot send its share of that class's scenario. So once the users exist (the master's
first ``spawning_complete`` of a run) the master looks at which workers run users of each
open-loop scenario's classes and deals that scenario again among those workers only. The
message reaches each worker before Locust's own ``spawning_complete`` does, which is when the
worker's schedules start: a scenario's arrivals stay exactly the asked process, per worker and
in total. A worker with none of its users gets none of it.
"""

from __future__ import annotations

from typing import Any

SHARES_MESSAGE = "loadkit_schedule_shares"
WIRE_VERSION = 1  # {"v": 1, "shares": {workload label: [index, count] | None}}


def deal_shares(workloads: list[Any], clients: list[str],
                counts: dict[str, dict[str, int]]) -> dict[str, dict[str, list[int] | None]]:  # fmt: skip
    """client id → {workload label: [index, count] among the workers running its classes, or None}.
    ``clients`` in worker-index order; ``counts``: client id → users per class name. A workload
    no worker seems to run is left out (its workers keep the shares they took at test start)."""
    out: dict[str, dict[str, list[int] | None]] = {c: {} for c in clients}
    for workload in workloads:
        names = {cls.__name__ for cls in workload.classes}
        running = [c for c in clients if sum(counts.get(c, {}).get(n, 0) for n in names) > 0]
        if not running:
            continue
        for client in clients:
            out[client][workload.label] = [running.index(client), len(running)] if client in running else None
    return out


def dispatched_counts(runner: Any) -> dict[str, dict[str, int]]:
    """Users per class on each worker: what the master's dispatcher sent them (exact, even when a
    worker's own report is late under load), else what the workers last reported."""
    planned = getattr(getattr(runner, "_users_dispatcher", None), "_users_on_workers", None)
    if isinstance(planned, dict) and planned:
        return {str(cid): dict(by_class) for cid, by_class in planned.items()}
    return {c.id: dict(c.user_classes_count or {}) for c in runner.clients.values()}


def summary(dealt: dict[str, dict[str, list[int] | None]], workers: int) -> dict[str, dict[str, int]]:
    """Per scenario: among how many of the run's workers its schedule was dealt (the manifest's)."""
    labels = {label for shares in dealt.values() for label in shares}
    return {
        label: {"workers": sum(1 for s in dealt.values() if s.get(label)), "of": workers} for label in labels
    }


def install(environment: Any, runtime: Any) -> None:
    """Master: deal at the first spawning_complete of each run. Worker: take the shares."""
    from locust.runners import MasterRunner, WorkerRunner

    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.register_message(SHARES_MESSAGE, lambda environment, msg, **_: take_shares(runtime, msg.data))
    if not isinstance(runner, MasterRunner):
        return
    dealt = {"done": False}

    def on_spawning_complete(**_: Any) -> None:
        open_loop = [w for w in runtime.schedules.workloads.values()
                     if (w.scenario.arrival or {}).get("model", "closed") != "closed"]  # fmt: skip
        if dealt["done"] or not open_loop:
            return
        dealt["done"] = True
        clients = sorted(runner.clients.keys(), key=runner.get_worker_index)
        dealt_to = deal_shares(open_loop, clients, dispatched_counts(runner))
        for client_id, shares in dealt_to.items():
            runner.send_message(SHARES_MESSAGE, {"v": WIRE_VERSION, "shares": shares}, client_id)
        if runtime.stats is not None:
            runtime.stats.set_manifest_fields({"open_loop_shares": summary(dealt_to, len(clients))})

    def on_test_start(**_: Any) -> None:
        dealt["done"] = False

    environment.events.spawning_complete.add_listener(on_spawning_complete)
    environment.events.test_start.add_listener(on_test_start)


def take_shares(runtime: Any, data: Any) -> None:
    """Worker: apply the master's shares; a payload of another version is refused, loudly."""
    if not isinstance(data, dict) or data.get("v") != WIRE_VERSION:
        message = f"open-loop shares from the master in an unknown form ({data!r:.200}): keeping the shares of test start"
        if runtime.stats is not None:
            runtime.stats.mark_invalid(message)
        return
    runtime.schedules.reshare(data.get("shares") or {})
