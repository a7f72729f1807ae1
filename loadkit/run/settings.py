"""The sub-configurations of one run, each parsed from the options once (run/runconfig.py
``build_run_config`` calls :func:`parse_settings`), frozen, and handed to the part that uses it:
the client its ``Timeouts`` and ``TlsSettings``, the adapters the ``RequestShape``, the users
their ``RetryPolicy`` and ``UserSettings``, the breaker its rules, the stats their
``StatsOptions`` (loadkit/stats/options.py, the stats' own config type).

Nothing here keeps the options: what a part needs is a field, so no consumer reads Locust's
``parsed_options`` again (one read per request for retries, one per user for the session
header, one per test start in the stats used to happen).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from loadkit.client.timer import Timeouts
from loadkit.client.tls import TlsSettings
from loadkit.records import RequestRecord
from loadkit.run.backoff import Backoff, BackoffRules
from loadkit.run.breakerrules import BreakerRules
from loadkit.run.costtiers import CostTierSettings
from loadkit.run.errors import ConfigError
from loadkit.run.gpuoptions import GpuSettings, gpu_settings
from loadkit.run.requestshape import RequestOptionError, RequestShape
from loadkit.run.runoptions import run_options
from loadkit.stats.metrics import Slo
from loadkit.stats.options import (
    DEFAULT_FINAL_WAIT_S,
    DEFAULT_STATS_INTERVAL_S,
    StatsOptions,
    failed_share_limit,
    parse_slo_item,
)
from loadkit.stats.rundir import default_report_dir
from loadkit.stats.validity import DEFAULT_MAX_FAILED_SHARE, EXIT_ON_ERROR

DEFAULT_MAX_RETRY_AFTER_S = 30.0
DEFAULT_LATE_THRESHOLD_MS = 1000.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a user waits before its next request: Retry-After (when honoured, capped) and,
    in closed loop, the backoff after a fast failure (run/backoff.py; None: --no-backoff)."""

    honor_retry_after: bool = False
    max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S
    backoff: BackoffRules | None = field(default_factory=BackoffRules)

    def wait_s(self, rec: RequestRecord, backoff: Backoff | None) -> float:
        """Seconds before the next request: the longer of Retry-After and the user's backoff."""
        wait = backoff.after(rec) if backoff is not None else 0.0
        if rec.retry_after_s is None or not self.honor_retry_after:
            return wait
        return max(wait, min(rec.retry_after_s, self.max_retry_after_s))


@dataclass(frozen=True, slots=True)
class FailureRules:
    """What failures do to a run: the circuit breaker (None: off) and the retry policy."""

    breaker: BreakerRules | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True, slots=True)
class UserSettings:
    """What every virtual user of the run is given (locust/user.py)."""

    session_header: str = ""


@dataclass(frozen=True, slots=True)
class ScheduleRules:
    """The open-loop schedule's limits (run/openloop.py, run/workloads.py)."""

    max_lag_s: float | None = None  # --max-schedule-lag; None: no limit
    late_threshold_ms: float = DEFAULT_LATE_THRESHOLD_MS


@dataclass(frozen=True, slots=True)
class StartChecks:
    """What the checks before a run do (run/preflight.py, the reachability check)."""

    strict_request: bool = False
    skip_reachability_check: bool = False


@dataclass(frozen=True, slots=True)
class TargetSettings:
    """What the options say of the targets (run/setup.py target_specs turns it into specs):
    --target/--targets texts, --engine, --api, --api-key and --model."""

    given: tuple[str, ...] = ()  # --target items and the web form's --targets, in that order
    engine: str = "auto"
    api: str | None = None
    api_key: str | None = None  # never in a report (run/manifest.py lists targets without it)
    model: str | None = None

    def __repr__(self) -> str:
        key = "'***'" if self.api_key else "None"
        return (f"TargetSettings(given={self.given!r}, engine={self.engine!r}, api={self.api!r}, "
                f"api_key={key}, model={self.model!r})")  # fmt: skip


@dataclass(frozen=True, slots=True)
class LaunchFacts:
    """What the run was launched with that loadkit only reports or hands on: -u and
    --spawn-rate (Locust fills a headless run's defaults in after ``init``: run/runconfig.py
    ``RunConfig.with_launch``), --model-config, --report-format, --web-host."""

    num_users: int | None = None
    spawn_rate: float | None = None
    model_config: str | None = None
    report_formats: tuple[str, ...] = ()  # sorted, each once
    web_host: str = ""


@dataclass(frozen=True, slots=True)
class Settings:
    """Every sub-configuration parsed from one set of options."""

    timeouts: Timeouts = field(default_factory=Timeouts)
    tls: TlsSettings = field(default_factory=TlsSettings)
    request: RequestShape = field(default_factory=RequestShape)
    failures: FailureRules = field(default_factory=FailureRules)
    stats: StatsOptions = field(default_factory=lambda: StatsOptions(report_dir=""))
    user: UserSettings = field(default_factory=UserSettings)
    schedule: ScheduleRules = field(default_factory=ScheduleRules)
    checks: StartChecks = field(default_factory=StartChecks)
    scrape_interval_s: float = 0.0  # 0: server metrics are not scraped during the run
    targets: TargetSettings = field(default_factory=TargetSettings)
    gpu: GpuSettings = field(default_factory=GpuSettings)  # --gpu-metrics, --gpu-nvml (run/gpuoptions.py)
    scenario: str = ""  # --scenario ("": the default scenario, run/workloads.py DEFAULT_SCENARIO)
    seed: int | None = None  # --seed as given (None: not given; run/runconfig.py resolve_salt)
    # The options as plugins see them: read-only, by dest (run/runoptions.py run_options).
    plugin_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    launch: LaunchFacts = field(default_factory=LaunchFacts)
    cost_tiers: CostTierSettings = field(default_factory=CostTierSettings)  # run/costtiers.py


def parse_settings(options: Any, slos: tuple[Slo, ...]) -> Settings:
    """The options' sub-configurations; ConfigError naming the option for a bad value (a value
    typed into the web UI's form skips argparse). ``slos``: the run's, already resolved."""
    try:
        timeouts = Timeouts(first_token_s=options.first_token_timeout, total_s=options.request_timeout)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"--first-token-timeout / --request-timeout: {exc}") from None
    try:
        request = RequestShape.from_options(options)
    except RequestOptionError as exc:
        raise ConfigError(str(exc)) from None
    try:
        failures = FailureRules(BreakerRules.from_options(options), retry_policy(options))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    lag = getattr(options, "max_schedule_lag", None)
    return Settings(
        timeouts=timeouts,
        tls=TlsSettings.from_options(options),
        request=request,
        failures=failures,
        stats=stats_options(options, slos),
        user=UserSettings(str(getattr(options, "session_header", "") or "")),
        schedule=ScheduleRules(
            float(lag) if lag else None,
            float(getattr(options, "late_threshold_ms", DEFAULT_LATE_THRESHOLD_MS)),
        ),
        checks=StartChecks(
            bool(getattr(options, "strict_request", False)),
            bool(getattr(options, "skip_reachability_check", False)),
        ),
        scrape_interval_s=float(getattr(options, "scrape_interval", 0) or 0),
        targets=target_settings(options),
        gpu=gpu_settings(options),
        scenario=scenario_path(options),
        seed=parse_seed(getattr(options, "seed", None)),
        plugin_options=run_options(options),
        launch=launch_facts(options),
        cost_tiers=CostTierSettings.from_options(options),
    )


def scenario_path(options: Any) -> str:
    """--scenario as given ("": the default scenario)."""
    return str(getattr(options, "scenario", "") or "")


def target_settings(options: Any) -> TargetSettings:
    given = [str(t) for t in getattr(options, "target", None) or []]
    # The web UI form's --targets: one string, targets separated by spaces.
    given += (getattr(options, "targets", "") or "").split()
    return TargetSettings(
        tuple(given),
        str(getattr(options, "engine", "auto") or "auto"),
        getattr(options, "api", None) or None,
        getattr(options, "api_key", None) or None,
        getattr(options, "model", None) or None,
    )


def launch_facts(options: Any) -> LaunchFacts:
    """-u, --spawn-rate, --model-config, --report-format and --web-host as the options hold them now."""
    return LaunchFacts(
        getattr(options, "num_users", None),
        getattr(options, "spawn_rate", None),
        getattr(options, "model_config", "") or None,
        tuple(sorted(set(getattr(options, "report_format", None) or []))),
        str(getattr(options, "web_host", "") or ""),
    )


def parse_seed(value: Any) -> int | None:
    """--seed as given (an int from the command line, text from the web form; "" or None: not
    given); ConfigError naming the option when it is not a whole number >= 0."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"--seed: {value!r} is not a whole number (the prompt salt of a run to repeat)"
        ) from None
    if not 0 <= seed < 2**63:
        raise ConfigError(f"--seed: {seed} is out of range (0 to 2**63-1)")
    return seed


def retry_policy(options: Any) -> RetryPolicy:
    """--honor-retry-after, --max-retry-after and the backoff options; ValueError when bad."""
    return RetryPolicy(
        bool(getattr(options, "honor_retry_after", False)),
        float(getattr(options, "max_retry_after", DEFAULT_MAX_RETRY_AFTER_S)),
        BackoffRules.from_options(options),
    )


def stats_options(options: Any, slos: tuple[Slo, ...] | None = None, strict: bool = True) -> StatsOptions:
    """The stats' configuration from the options (None: every default). ``slos``: the run's
    resolved SLOs (web form > command line > scenario); None: the options' own --slo (the stats
    used without loadkit's runtime). ConfigError for a bad --slo or --max-failed-share; not
    ``strict``: such a value is left out (its default), for the stats' listeners, which must not
    fail on a value typed into the web form before loadkit's start refuses it, naming it."""

    def get(name: str, default: Any) -> Any:
        return getattr(options, name, default) if options is not None else default

    if slos is None:
        given = get("slo", None) or []
        # The last value given for a key wins, as with any repeated option.
        found: dict[str, Slo] = {}
        for text in [given] if isinstance(given, str) else given:
            try:
                found.update((s.key, s) for s in parse_slo_item(str(text)))
            except argparse.ArgumentTypeError as exc:
                if strict:
                    raise ConfigError(str(exc)) from None
        slos = tuple(found.values())
    try:
        max_failed_share = failed_share_limit(options)
    except ValueError as exc:
        if strict:
            raise ConfigError(str(exc)) from None
        max_failed_share = DEFAULT_MAX_FAILED_SHARE
    return StatsOptions(
        report_dir=get("report_dir", None) or default_report_dir(),
        raw_log=bool(get("raw_log", False)),
        raw_log_events=bool(get("raw_log_events", False)),
        slos=slos,
        stats_interval=float(get("stats_interval", DEFAULT_STATS_INTERVAL_S)),
        console_table=not get("no_console_table", False),
        final_report_wait=float(get("final_report_wait", DEFAULT_FINAL_WAIT_S)),
        max_failed_share=max_failed_share,
        given_report_dir=str(get("report_dir", "") or ""),
        headless=bool(get("headless", False)),
        expect_workers=get("expect_workers", None),
        exit_code_on_error=int(get("exit_code_on_error", EXIT_ON_ERROR)),
    )


__all__ = [
    "DEFAULT_MAX_FAILED_SHARE",
    "FailureRules",
    "LaunchFacts",
    "RetryPolicy",
    "ScheduleRules",
    "Settings",
    "StartChecks",
    "TargetSettings",
    "UserSettings",
    "launch_facts",
    "parse_seed",
    "parse_settings",
    "retry_policy",
    "stats_options",
]
