"""Run set-up helpers: the targets the configuration names, TLS, the request options, and checks of
values typed into the web UI's form (which skip argparse). Read-only on the options."""

from __future__ import annotations

import logging
from typing import Any

from loadkit.client.tls import INSECURE_WARNING, TlsConfigError, TlsSettings
from loadkit.client.tls import use as use_tls
from loadkit.run.detection import AUTO_NAME
from loadkit.run.errors import ConfigError
from loadkit.run.requestshape import RequestShape
from loadkit.run.settings import TargetSettings
from loadkit.servers.targets import TargetSpec, check_unique_names, parse_target

log = logging.getLogger("loadkit")


def target_specs(
    targets: TargetSettings, host: str | None, from_scenario: list[dict[str, Any]] | None = None
) -> list[TargetSpec]:
    """Targets from --target/--targets; else --host; else the scenario's [[targets]]."""
    specs = [parse_target(text, targets.engine) for text in targets.given]
    if not specs and not host and from_scenario:
        specs = [
            TargetSpec(
                t["name"],
                t["url"],
                t.get("engine") or "auto",
                t.get("api"),
                t.get("model"),
                t.get("priority_as"),
                t.get("gpu_hour_cost"),
                t.get("gpus"),
                t.get("gpu_metrics"),
            )
            for t in from_scenario
        ]
    if not specs:
        if not host:
            raise ConfigError("no target: give --host URL, --target NAME=URL, or [[targets]] in the scenario")
        # With --engine auto the target is named after what detection finds (run/detection.py).
        name = targets.engine if targets.engine != "auto" else AUTO_NAME
        specs = [TargetSpec(name, host, targets.engine, targets.api, targets.model)]
    check_unique_names(specs)
    return specs


_insecure_warned: list[bool] = []


def configure_tls(settings: TlsSettings) -> TlsSettings:
    """The run's TLS settings become this process's client context (loadkit/client/tls.py), before any
    target is probed or built. --insecure is said loudly: on the console here (once per
    process), and in the report's manifest and warnings (run/manifest.py)."""
    try:
        use_tls(settings)
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None
    if settings.insecure and not _insecure_warned:
        _insecure_warned.append(True)
        log.warning("loadkit: WARNING: %s", INSECURE_WARNING)
    return settings


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """Log a warning once per process (a web UI session configures at every start)."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning(message)


def apply_exact_output(shape: RequestShape, scenario: Any) -> None:
    """--exact-output overrides the scenario's [prompt] exact_output (the scenario is loaded
    afresh for every run)."""
    prompt = getattr(scenario, "prompt", None)
    if shape.exact_output is not None and prompt is not None:
        prompt.exact_output = shape.exact_output


def validate_slos(options: Any) -> dict[str, float]:
    """SLOs typed into the web UI's form skip argparse: check them here, one clear error.
    Returns {metric: limit ms} (the last value given for a key wins, as in the stats layer)."""
    from loadkit.run.runconfig import given_slos, parse_slos

    return {slo.key: slo.limit_ms for slo in parse_slos(given_slos(options))}


def validate_failed_share(options: Any) -> None:
    """--max-failed-share typed into the web UI's form skips argparse: one clear error."""
    from loadkit.stats.options import failed_share_limit

    try:
        failed_share_limit(options)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
