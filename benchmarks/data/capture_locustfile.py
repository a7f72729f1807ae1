"""Records what a loadkit master receives from its workers, for benchmarks/bench_master.py.

A locustfile: the user classes of ``locustfiles/mixed.py`` (Chat and the agent-multiturn
sessions), plus a master-side ``worker_report`` listener that keeps every report's data dict
(Locust's stats and loadkit's snapshot under ``data["loadkit"]``, exactly as the master got
them off the wire) and writes them, msgpack, to ``$LOADKIT_CAPTURE`` when the master quits.
How the shipped fixture was made: benchmarks/data/README.md.
"""

import os
import sys

import msgpack
from locust import events
from locust.rpc.protocol import decode, encode
from locust.runners import MasterRunner

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from locustfiles.mixed import Agent, Chat  # noqa: E402,F401  (the users of this run)

captured: list[dict] = []


def _copy(data):
    """A deep copy the way the wire makes one (Locust's own msgpack options)."""
    return msgpack.loads(
        msgpack.dumps(data, default=encode), raw=False, strict_map_key=False, object_hook=decode
    )


@events.init.add_listener
def _capture(environment, **_):
    if not isinstance(environment.runner, MasterRunner):
        return

    def keep(client_id, data, **_):
        # A copy, before anything on the master can change it.
        captured.append({"client_id": client_id, "data": _copy(data)})

    environment.events.worker_report.add_listener(keep)

    def write(**_):
        with open(os.environ["LOADKIT_CAPTURE"], "wb") as f:
            f.write(msgpack.dumps(captured, default=encode))

    environment.events.quitting.add_listener(write)
