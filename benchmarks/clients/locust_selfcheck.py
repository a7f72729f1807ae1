"""loadkit's locustfile with the client self-check installed at init: what the lead's glue
will do once `loadkit.selfcheck.install(environment)` is wired into loadkit/locust/listeners.py.

    locust -f benchmarks/clients/locust_selfcheck.py --headless --host http://127.0.0.1:8000 ...
"""

from typing import Any

from locust import events

from loadkit import selfcheck
from loadkit.locust.locustfile import LLM  # noqa: F401  (Locust collects User classes by name)


@events.init.add_listener
def _install_selfcheck(environment: Any, **_kw: Any) -> None:
    selfcheck.install(environment)
