"""One run configuration: what a test start decided, frozen, built once per start per process.

The options are read once per start per process, here: :func:`build_run_config` makes the
whole typed, frozen :class:`RunConfig` (the decisions, and the sub-configurations of
run/settings.py: timeouts, TLS, request shape, failure and retry rules, the stats' options
with the SLOs parsed once, the users' settings, the targets, the scenario path, the seed, the
plugins' options and the launch facts), and every consumer takes its part of it.
What the start finds afterwards (detections, pre-flight, shards, the run's directory) is its
:class:`StartPlan`, so a built RunConfig is never replaced, but for the launch facts (-u and
--spawn-rate) Locust sets after a configuration made ahead of the start (``with_launch``).

Precedence, for every setting that several sources give (docs/configuration.md):
web UI form > command line (and LOADKIT_* environment / config file) > scenario > defaults.
Locust copies the web form into its options itself before the run starts; the command
line's own values are kept from ``init`` (:func:`snapshot`), which is how a value is known to
come from the form.

On a distributed run the master sends each worker its RunConfig as one versioned message
(``CONFIG_MESSAGE``, ``{"v": WIRE_VERSION, ...}``) at test start, before Locust's spawn message; a worker
that gets another version refuses to run, naming both versions.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from loadkit.client.timer import Timeouts
from loadkit.client.tls import TlsSettings
from loadkit.run.errors import ConfigError
from loadkit.run.requestshape import RequestShape
from loadkit.run.settings import (
    FailureRules,
    LaunchFacts,
    ScheduleRules,
    Settings,
    StartChecks,
    TargetSettings,
    UserSettings,
    parse_seed,
    parse_settings,
    scenario_path,
)
from loadkit.stats.metrics import Slo
from loadkit.stats.options import StatsOptions, parse_slo_item

CONFIG_MESSAGE = "loadkit_run_config"
# 2: the run's report directory and prompt salt (a worker of version 1 would write its raw log
# elsewhere and send unsalted prompts: it must refuse, not run).
WIRE_VERSION = 2
FORM, COMMAND_LINE, SCENARIO = "web form", "command line", "scenario"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The whole configuration of one test start, built once (:func:`build_run_config`): the
    run's decisions (the same on every node; they cross to the workers) and the typed
    sub-configurations every node parses from its own options (run/settings.py). What the
    start finds out afterwards (detections, pre-flight, shards) is its :class:`StartPlan`."""

    slos: tuple[str, ...] = ()  # "KEY=MS" items, as the options give them
    slo_source: str | None = None  # FORM, COMMAND_LINE, SCENARIO, or None (no SLOs)
    max_requests: int | None = None
    run_time_s: float | None = None  # -t, else a headless run's scenario duration (no stages)
    run_time_source: str | None = None
    warmup_s: float = 0.0
    plugins: dict[str, str] = field(default_factory=dict)  # the fingerprint every node must match
    salt: int = 0  # mixed into every prompt text of the run (workload/text.py salted_seed); 0: none
    salt_source: str | None = None  # "--seed" (FORM / COMMAND_LINE wording kept) or "random"
    settings: Settings = field(default_factory=Settings)  # parsed on each node, not sent

    # -- the sub-configurations, by their consumers' names -----------------------------------

    @property
    def timeouts(self) -> Timeouts:
        return self.settings.timeouts

    @property
    def tls(self) -> TlsSettings:
        return self.settings.tls

    @property
    def request(self) -> RequestShape:
        return self.settings.request

    @property
    def failures(self) -> FailureRules:
        return self.settings.failures

    @property
    def stats(self) -> StatsOptions:
        return self.settings.stats

    @property
    def user(self) -> UserSettings:
        return self.settings.user

    @property
    def schedule(self) -> ScheduleRules:
        return self.settings.schedule

    @property
    def checks(self) -> StartChecks:
        return self.settings.checks

    @property
    def targets(self) -> TargetSettings:
        return self.settings.targets

    @property
    def launch(self) -> LaunchFacts:
        return self.settings.launch

    def with_launch(self, launch: LaunchFacts) -> RunConfig:
        """The same configuration launched with ``launch``: Locust fills -u and --spawn-rate of
        a headless run in after ``init``, where the early check built the configuration, and
        the web form sets them at each start without making the configuration stale
        (locust/starts.py LOCUST_FILLED); nothing else changes."""
        return (
            self
            if launch == self.settings.launch
            else replace(self, settings=replace(self.settings, launch=launch))
        )

    def slo_limits(self) -> dict[str, float]:
        """{metric: limit ms}; the last value given for a key wins."""
        return {slo.key: slo.limit_ms for slo in self.slo_objects()}

    def slo_objects(self) -> tuple[Slo, ...]:
        """The run's Slo objects, one per metric (parsed once, when the config was built)."""
        return self.settings.stats.slos

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def to_wire(self, plan: StartPlan, shard: tuple[int, int] | None) -> dict[str, Any]:
        """The payload for one worker: the decisions and the start plan (``shard`` None: it
        joined late). The sub-configurations are not sent: each node parses its options, which
        Locust sends the workers itself."""
        return {"v": WIRE_VERSION, "slos": list(self.slos), "slo_source": self.slo_source,
                "max_requests": self.max_requests, "run_time_s": self.run_time_s,
                "run_time_source": self.run_time_source, "warmup_s": self.warmup_s,
                "shard": list(shard) if shard is not None else None, "plugins": dict(self.plugins),
                "detections": dict(plan.detections), "preflight": plan.preflight,
                "report_dir": plan.report_dir, "salt": self.salt, "salt_source": self.salt_source}  # fmt: skip

    @classmethod
    def from_wire(cls, data: Any) -> tuple[RunConfig, StartPlan]:
        """A worker's decisions and start plan from the master's message; ConfigError for
        another version. The decisions get this node's sub-configurations in build_run_config."""
        version = data.get("v") if isinstance(data, dict) else None
        if version != WIRE_VERSION:
            raise ConfigError(f"the master sent a run configuration of version {version!r}; this worker "
                              f"understands version {WIRE_VERSION}: run the same loadkit on every node")  # fmt: skip
        shard = data.get("shard")
        config = cls(slos=tuple(data.get("slos") or ()), slo_source=data.get("slo_source"),
                     max_requests=data.get("max_requests"), run_time_s=data.get("run_time_s"),
                     run_time_source=data.get("run_time_source"), warmup_s=float(data.get("warmup_s") or 0),
                     plugins=dict(data.get("plugins") or {}), salt=int(data.get("salt") or 0),
                     salt_source=data.get("salt_source"))  # fmt: skip
        plan = StartPlan(shard=(int(shard[0]), int(shard[1])) if shard else (0, 1), late=shard is None,
                         detections=dict(data.get("detections") or {}), preflight=data.get("preflight"),
                         report_dir=data.get("report_dir"))  # fmt: skip
        return config, plan


@dataclass(frozen=True, slots=True)
class StartPlan:
    """What a test start found out and dealt after its configuration was built: detections,
    pre-flight's verdicts, the shards, the run's directory. Replaced as the start goes on
    (``with_``); the RunConfig it belongs to never is."""

    shard: tuple[int, int] = (0, 1)
    late: bool = False  # a worker that joined after the start: not one of the dealt shares
    shards: dict[str, tuple[int, int]] = field(default_factory=dict)  # master: by worker client id
    detections: dict[str, Any] = field(default_factory=dict)  # url → Detected.to_wire()
    preflight: dict[str, Any] | None = None  # {target: verdict.to_wire()}; None: not run
    report_dir: str | None = None  # this run's directory, as the master chose it (stats/rundir.py)

    def dropped_for(self, target: str) -> list[str]:
        """The body fields pre-flight found ``target`` refuses."""
        entry = (self.preflight or {}).get(target) or {}
        return [str(p) for p in entry.get("drop") or []]

    def with_(self, **changes: Any) -> StartPlan:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class ScenarioFacts:
    """What the run's scenarios say that the configuration depends on."""

    slos: Callable[[], dict[str, float]] = dict  # asked only without --slo (run/workloads.py run_slos)
    duration_s: float | None = None
    staged: bool = False  # stages (or a locustfile's load shape) end the run themselves


def build_run_config(options: Any, command_line: dict[str, Any],
                     scenario: ScenarioFacts | Callable[[str], ScenarioFacts],
                     given: RunConfig | None = None, plugins: dict[str, str] | None = None) -> RunConfig:  # fmt: skip
    """The one build of a test start's configuration. ``scenario``: the scenarios' facts, or
    what loads them from --scenario (called first, with the path the options give). ``given``:
    a worker's decisions from the master (its SLOs, run time, salt), else they are decided
    here: web form > command line > scenario > defaults. Either way the sub-configurations
    come from this node's options. ConfigError naming the option for any bad value."""
    if not isinstance(scenario, ScenarioFacts):
        scenario = scenario(scenario_path(options))
    if given is not None:
        return given.with_(settings=parse_settings(options, parse_slos(given.slos)))
    slos, slo_source = resolve_slos(options, command_line, scenario.slos)
    run_time, run_time_source = resolve_run_time(options, command_line, scenario.duration_s, scenario.staged)
    warmup = float(getattr(options, "warmup", 0) or 0)
    if warmup and run_time_source == SCENARIO:
        # The warm-up's stage plan bounds the run (locust/runtime.py _configure_stages).
        run_time, run_time_source = None, None
    salt, salt_source = resolve_salt(options, command_line)
    settings = parse_settings(options, parse_slos(slos))
    return RunConfig(slos=slos, slo_source=slo_source, max_requests=options.max_requests or None,
                     run_time_s=run_time, run_time_source=run_time_source, warmup_s=warmup,
                     plugins=dict(plugins or {}), salt=salt, salt_source=salt_source, settings=settings)  # fmt: skip


def parse_slos(items: tuple[str, ...]) -> tuple[Slo, ...]:
    """ "KEY=MS" items → Slo objects, one per metric (the last value given for a key wins);
    ConfigError for a bad item (the web form's text skips argparse)."""
    slos: dict[str, Slo] = {}
    for item in items:
        try:
            slos.update((s.key, s) for s in parse_slo_item(item))
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(str(exc)) from None
    return tuple(slos.values())


def snapshot(options: Any) -> dict[str, Any]:
    """The command line's values (taken at ``init``, before any web form changes them)."""
    return dict(vars(options)) if options is not None else {}


def given_slos(options: Any) -> tuple[str, ...]:
    """--slo as given: a list of "KEY=MS[,KEY=MS]" items (the web form's one string too)."""
    given = getattr(options, "slo", None) or []
    return tuple(str(item) for item in ([given] if isinstance(given, str) else given) if str(item).strip())


def source_of(key: str, options: Any, command_line: dict[str, Any]) -> str:
    """FORM when the web form changed ``key`` from the command line's value, else COMMAND_LINE."""
    if key in command_line and command_line[key] != getattr(options, key, None):
        return FORM
    return COMMAND_LINE


def resolve_slos(options: Any, command_line: dict[str, Any], scenario_slos: Callable[[], dict[str, float]]
                 ) -> tuple[tuple[str, ...], str | None]:  # fmt: skip
    """The run's SLOs and where they came from: the form's or the command line's --slo, else
    the scenarios' [slos] (the one place scenario SLOs enter a run; per-tenant SLOs extend it).
    ``scenario_slos`` is asked only without --slo: scenarios that disagree are an error then."""
    given = given_slos(options)
    if given:
        return given, source_of("slo", options, command_line)
    from_scenarios = scenario_slos()
    if from_scenarios:
        return tuple(f"{key}={float(limit):g}" for key, limit in from_scenarios.items()), SCENARIO
    return (), None


def resolve_run_time(options: Any, command_line: dict[str, Any], scenario_duration: float | None,
                     staged: bool) -> tuple[float | None, str | None]:  # fmt: skip
    """-t (form or command line), else a headless run's scenario ``duration_s`` when the scenario
    has no stages (stages end the run themselves)."""
    given = getattr(options, "run_time", None)
    if given:
        return float(given), source_of("run_time", options, command_line)
    if getattr(options, "headless", False) and scenario_duration and not staged:
        return float(int(scenario_duration)), SCENARIO
    return None, None


SALT_RANDOM = "random"
SALT_BITS = 32  # short enough to type back as --seed


def resolve_salt(options: Any, command_line: dict[str, Any]) -> tuple[int, str]:
    """The run's prompt salt and where it came from: --seed (form or command line; 0 sends the
    scenario's own prompts, unsalted), else a fresh random one, so a rerun is not answered from
    the server's prefix cache (issue 32)."""
    seed = parse_seed(getattr(options, "seed", None))
    if seed is not None:
        return seed, f"--seed ({source_of('seed', options, command_line)})"
    import secrets

    return 1 + secrets.randbelow(2**SALT_BITS - 1), SALT_RANDOM


def open_loop_spawn_rate(spawn_rate: float | None, users: int | None, open_loop: bool) -> float | None:
    """Open loop: users are a pool of senders and the schedule waits until all exist; spawning
    them one a second (Locust's default) would only delay the run, so they come at once."""
    if open_loop and users and (not spawn_rate or spawn_rate < users):
        return float(users)
    return spawn_rate
