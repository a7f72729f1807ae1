"""One run configuration: what a test start decided, frozen, built once per start per process.

Run set-up used to write its decisions back into Locust's ``parsed_options`` (the SLOs and a
marker saying where they came from, the run time, the spawn rate, the shards, the plugin
fingerprint, detections, pre-flight's verdict) and the stats layer re-read them. Now the
options are only read: set-up builds a :class:`RunConfig` and every consumer reads that.

Precedence, for every setting that several sources give (docs/configuration.md):
web UI form > command line (and LOADKIT_* environment / config file) > scenario > defaults.
Locust copies the web form into ``parsed_options`` itself before the run starts; the command
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

from loadkit.glue.errors import ConfigError

CONFIG_MESSAGE = "loadkit_run_config"
# 2: the run's report directory and prompt salt (a worker of version 1 would write its raw log
# elsewhere and send unsalted prompts: it must refuse, not run).
WIRE_VERSION = 2
FORM, COMMAND_LINE, SCENARIO = "web form", "command line", "scenario"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The decisions of one test start (the same on every node, but for ``shard``)."""

    slos: tuple[str, ...] = ()  # "KEY=MS" items, as the options give them
    slo_source: str | None = None  # FORM, COMMAND_LINE, SCENARIO, or None (no SLOs)
    max_requests: int | None = None
    run_time_s: float | None = None  # -t, else a headless run's scenario duration (no stages)
    run_time_source: str | None = None
    warmup_s: float = 0.0
    shard: tuple[int, int] = (0, 1)
    late: bool = False  # a worker that joined after the start: not one of the dealt shares
    shards: dict[str, tuple[int, int]] = field(default_factory=dict)  # master: by worker client id
    plugins: dict[str, str] = field(default_factory=dict)  # the fingerprint every node must match
    detections: dict[str, Any] = field(default_factory=dict)  # url → Detected.to_wire()
    preflight: dict[str, Any] | None = None  # {target: verdict.to_wire()}; None: not run
    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    report_dir: str | None = None  # this run's directory, as the master chose it (stats/rundir.py)
    salt: int = 0  # mixed into every prompt text of the run (workload/text.py salted_seed); 0: none
    salt_source: str | None = None  # "--seed" (FORM / COMMAND_LINE wording kept) or "random"

    def slo_limits(self) -> dict[str, float]:
        """{metric: limit ms}; the last value given for a key wins."""
        return {slo.key: slo.limit_ms for slo in self.slo_objects()}

    def slo_objects(self) -> tuple[Any, ...]:
        """The stats layer's Slo objects (loadkit.stats.options), one per metric."""
        from loadkit.stats.options import parse_slo_item

        slos: dict[str, Any] = {}
        for item in self.slos:
            try:
                slos.update((s.key, s) for s in parse_slo_item(item))
            except argparse.ArgumentTypeError as exc:
                raise ConfigError(str(exc)) from None
        return tuple(slos.values())

    def dropped_for(self, target: str) -> list[str]:
        """The body fields pre-flight found ``target`` refuses."""
        entry = (self.preflight or {}).get(target) or {}
        return [str(p) for p in entry.get("drop") or []]

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def to_wire(self, shard: tuple[int, int] | None) -> dict[str, Any]:
        """The payload for one worker (``shard`` None: it joined late)."""
        return {"v": WIRE_VERSION, "slos": list(self.slos), "slo_source": self.slo_source,
                "max_requests": self.max_requests, "run_time_s": self.run_time_s,
                "run_time_source": self.run_time_source, "warmup_s": self.warmup_s,
                "shard": list(shard) if shard is not None else None, "plugins": dict(self.plugins),
                "detections": dict(self.detections), "preflight": self.preflight,
                "report_dir": self.report_dir, "salt": self.salt, "salt_source": self.salt_source}  # fmt: skip

    @classmethod
    def from_wire(cls, data: Any) -> RunConfig:
        """A worker's config from the master's message; ConfigError for another version."""
        version = data.get("v") if isinstance(data, dict) else None
        if version != WIRE_VERSION:
            raise ConfigError(f"the master sent a run configuration of version {version!r}; this worker "
                              f"understands version {WIRE_VERSION}: run the same loadkit on every node")  # fmt: skip
        shard = data.get("shard")
        return cls(slos=tuple(data.get("slos") or ()), slo_source=data.get("slo_source"),
                   max_requests=data.get("max_requests"), run_time_s=data.get("run_time_s"),
                   run_time_source=data.get("run_time_source"), warmup_s=float(data.get("warmup_s") or 0),
                   shard=(int(shard[0]), int(shard[1])) if shard else (0, 1), late=shard is None,
                   plugins=dict(data.get("plugins") or {}), detections=dict(data.get("detections") or {}),
                   preflight=data.get("preflight"), report_dir=data.get("report_dir"),
                   salt=int(data.get("salt") or 0), salt_source=data.get("salt_source"))  # fmt: skip


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
