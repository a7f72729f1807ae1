"""loadkit's own locustfile, watched: a listener that runs before loadkit's at ``init`` keeps
the parsed options as the command line gave them; at test stop each process writes what
changed in them since, and how often its runtime configured (tests/integration/test_run_config.py)."""

import json
import os

from locust import events

SPY_DIR = os.environ["LOADKIT_TEST_SPY_DIR"]
_seen: dict = {}


@events.init.add_listener
def keep_options(environment, **_):
    _seen["options"] = {k: repr(v) for k, v in vars(environment.parsed_options).items()}


@events.test_stop.add_listener
def write_changes(environment, **_):
    now = {k: repr(v) for k, v in vars(environment.parsed_options).items()}
    before = _seen["options"]
    changed = {k: [before.get(k), now.get(k)] for k in set(before) | set(now) if before.get(k) != now.get(k)}
    role = type(environment.runner).__name__
    runtime = environment.loadkit
    out = {
        "role": role,
        "changed": changed,
        "configured": runtime.configured,
        "slos": list(runtime.config.slos),
        "slo_source": runtime.config.slo_source,
    }
    with open(os.path.join(SPY_DIR, f"{role}.{os.getpid()}.json"), "w") as f:
        json.dump(out, f)


from loadkit import ScenarioUser  # noqa: E402 (after the spy: its init listener runs first)


class Scenario(ScenarioUser):
    pass
