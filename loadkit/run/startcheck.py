"""Can a run start with these options? The checks a start from the web UI's form gets before
Locust starts anything, so a mistake shows in the form instead of only in the log.

Cheap and side-effect free: the scenario file parses, the options parse as the run's
configuration would (SLOs, --max-failed-share, --seed, timeouts, the request shape...), the
targets parse and name engines that exist, and every target accepts a TCP connection
(unless --skip-reachability-check). Engine detection and part of the set-up happen at test
start as before; an error there is shown in the web UI too (Runtime.start_error).
"""

from __future__ import annotations

import socket
from typing import Any

from loadkit.client.httpstream import Endpoint
from loadkit.plugins import get_engine
from loadkit.run.errors import ConfigError
from loadkit.run.runconfig import given_slos, parse_slos
from loadkit.run.settings import parse_settings, scenario_path
from loadkit.run.setup import target_specs
from loadkit.run.workloads import DEFAULT_SCENARIO, load_scenario_file
from loadkit.servers.targets import TargetError, TargetSpec

CONNECT_TIMEOUT_S = 5.0


def check_reachable(name: str, url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    try:
        ep = Endpoint.parse(url)
    except ValueError as exc:
        raise TargetError(f"target {name!r}: {exc}") from None
    try:
        socket.create_connection((ep.host, ep.port), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(f"target {name or url!r} at {url} is unreachable: {exc}") from None


def check_specs(specs: list[TargetSpec]) -> None:
    for spec in specs:
        try:
            Endpoint.parse(spec.url)
        except ValueError as exc:
            raise TargetError(f"target {spec.name or spec.url!r}: {exc}") from None
        if spec.engine != "auto":
            get_engine(spec.engine)  # PluginError naming the engines installed


def check_start(options: Any, host: str | None) -> None:
    """Raise the error (ConfigError, TargetError, PluginError) a start with ``options`` would
    meet first; return quietly when it can start."""
    scenario = load_scenario_file(scenario_path(options) or str(DEFAULT_SCENARIO))
    # The same parse as the run's configuration (run/settings.py): every bad value, named.
    settings = parse_settings(options, parse_slos(given_slos(options)))
    specs = target_specs(settings.targets, host, getattr(scenario, "targets", None) or [])
    check_specs(specs)
    if not settings.checks.skip_reachability_check:
        for spec in specs:
            check_reachable(spec.name, spec.url)
