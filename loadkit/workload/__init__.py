"""Workloads: scenario files turned into a seeded, reproducible stream of requests and sessions.

```python
from loadkit.workload import load_scenario, ScenarioError
scenario = load_scenario("uneven_chat")  # a shipped scenario by name, or a path to a .toml file
source = scenario.request_source(worker_index=0, worker_count=1)
item = source.next_item()   # GenerationRequest | Session | TraceSession | None
```
"""

from loadkit.workload.errors import ScenarioError
from loadkit.workload.realised import prompt_drift
from loadkit.workload.scenario import SCHEMA, Scenario, load_scenario, parse_scenario
from loadkit.workload.sessions import Session, TraceSession
from loadkit.workload.source import RequestSource

__all__ = [
    "SCHEMA",
    "RequestSource",
    "Scenario",
    "ScenarioError",
    "Session",
    "TraceSession",
    "load_scenario",
    "parse_scenario",
    "prompt_drift",
]
