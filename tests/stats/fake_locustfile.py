"""A locustfile whose users fabricate RequestRecords (no HTTP): it exercises only the stats glue.

Each "request" sleeps through a random TTFT and a few token gaps, then hands its record to
loadkit's collector; a user killed at test stop records `cancelled`, as the real timer does.
"""

from __future__ import annotations

import random
import time

import gevent
from locust import User, constant, events, task

from loadkit.records import RequestRecord
from loadkit.stats import add_stats_arguments, install_stats
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.runcontext import RunContext

STAGE = {"name": "s1", "level": 20, "level_kind": "users", "duration_s": 4.0}


@events.init_command_line_parser.add_listener
def _add_options(parser, **_):
    add_stats_arguments(parser)


@events.init.add_listener
def _install(environment, **_):
    environment.loadkit_stats = install_stats(environment)
    # The built-in sections too, as loadkit's locustfile installs them: they must survive the
    # worker→master protocol (final handshake, lost worker) exactly as the engine stats do.
    sections = BuiltinSections(environment.loadkit_stats, RunContext(plan=(STAGE,)))
    sections.install()


class FakeLLM(User):
    wait_time = constant(0)

    @task
    def generate(self) -> None:
        stats = self.environment.loadkit_stats
        runner = self.environment.runner
        worker = getattr(runner, "worker_index", None) if type(runner).__name__ == "WorkerRunner" else None
        record = RequestRecord(request_id=f"{worker}-{random.getrandbits(64):016x}", engine="fake",
                               adapter="none", label=random.choice(("chat", "rag")), worker=worker,
                               user_class=type(self).__name__, stage=STAGE["name"], turn=1)  # fmt: skip
        stats.add_scheduled()
        record.t_send_ns = time.perf_counter_ns()
        try:
            gevent.sleep(random.uniform(0.005, 0.05))
            for _ in range(random.randint(1, 6)):
                record.event_t_ns.append(time.perf_counter_ns())
                record.event_tokens.append(random.choice((1, 1, 2)))
                gevent.sleep(random.uniform(0.002, 0.01))
        except gevent.GreenletExit:
            record.outcome = "cancelled"
            self._finish(record)
            raise
        self._finish(record)

    def _finish(self, record: RequestRecord) -> None:
        record.t_end_ns = time.perf_counter_ns()
        record.n_out = sum(record.event_tokens) if record.event_tokens else None
        record.n_out_source = "events"
        record.n_in = random.randint(10, 2000)
        self.environment.loadkit_stats.add(record)
