"""Where Locust hands its parsed options over to loadkit: the one read of
``environment.parsed_options`` (besides the web UI's start-form check, which mirrors what
Locust's /swarm applies to them: webui/startform.py).

Locust's listeners call it at ``init`` and at each test start (a worker gets the master's
options just before its test_start), and when Locust starts a load shape; what they read goes
into the run's typed configuration (run/runconfig.py ``build_run_config``), which every
consumer takes its part of. tests/locust/test_handover.py checks no other module reads them.
"""

from __future__ import annotations

from typing import Any


def handed_options(environment: Any) -> Any:
    """The options Locust parsed (None: an environment built without them)."""
    return getattr(environment, "parsed_options", None)
