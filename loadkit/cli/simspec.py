"""`loadkit run --sim`: which simulators to start, with which profile, on which port.

    --sim NAME=PROFILE[,port=PORT]   that profile (docs/simulator.md, `loadkit sim --list-profiles`)
    --sim NAME[,port=PORT]           profile NAME if it is one (`--sim fast`), else the scenario's
                                     `[sim] profile`, else `default`
    (no --sim, and no target)        one simulator named `sim` with the scenario's profile
                                     (a target: --host, --target(s), LOCUST_HOST, LOADKIT_TARGET(S),
                                     the scenario's [[targets]], or a Locust config file's host)

Port 0 (the default) is any free port; the ready line says which. A scenario names the
profile whose context fits it (`[sim] profile = "long"` for the long-context ones), so
`loadkit run --scenario mooncake_replay` runs valid without more; an explicit profile with a
shorter context than the scenario's is said in one line (its requests would get the
engine's 400).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from loadkit.errors import UserError

SIM_KEYS = ("port",)
AUTO_NAME = "sim"
# Options and variables that give the run a target (then no simulator is started for it).
TARGET_FLAGS = ("--host", "-H", "--target", "--targets")
TARGET_ENV = ("LOCUST_HOST", "LOADKIT_TARGET", "LOADKIT_TARGETS")


@dataclass(slots=True)
class SimSpec:
    name: str
    profile: str | None  # None: not given (picked by `plan`)
    port: int = 0


def parse_sim(value: str) -> SimSpec:
    """One --sim value: NAME[=PROFILE][,port=PORT]; UserError naming the value otherwise."""
    from loadkit.sim.config import PROFILES

    head, *pairs = value.split(",")
    name, _, profile = head.partition("=")
    name, profile = name.strip(), profile.strip()
    if not name:
        raise UserError(f"--sim {value!r}: expected NAME[=PROFILE][,port=PORT]")
    if profile and profile not in PROFILES:
        raise UserError(f"--sim {value!r}: unknown profile {profile!r} (choose from {', '.join(PROFILES)})")
    spec = SimSpec(name, profile or None)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key.strip() not in SIM_KEYS:
            raise UserError(f"--sim {value!r}: unknown part {pair!r}; allowed keys: {', '.join(SIM_KEYS)}")
        try:
            spec.port = int(raw.strip())
        except ValueError:
            spec.port = -1
        if not 0 <= spec.port <= 65535:
            raise UserError(
                f"--sim {value!r}: port: expected an integer 0-65535 (0 = any free port), got {raw!r}"
            )
    return spec


def _option(rest: list[str], *flags: str) -> str | None:
    """The last value given to one of ``flags`` in ``rest`` (``--flag V`` or ``--flag=V``)."""
    found = None
    for i, arg in enumerate(rest):
        for flag in flags:
            if arg == flag and i + 1 < len(rest):
                found = rest[i + 1]
            elif arg.startswith(flag + "="):
                found = arg.split("=", 1)[1]
    return found


def _config_names_target(rest: list[str]) -> bool:
    """Whether a Locust config file this run reads (Locust's defaults, ``--config``) sets a
    host or targets: then it is the user's target, not a simulator's to replace."""
    keys = {"host", "target", "targets"}
    files = [
        Path("~/.locust.conf").expanduser(),
        Path("locust.conf"),
        *map(Path, filter(None, [_option(rest, "--config")])),
    ]
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        if any(line.split("=", 1)[0].strip() in keys for line in lines if "=" in line):
            return True
    try:
        with open("pyproject.toml", "rb") as f:
            table = tomllib.load(f).get("tool", {}).get("locust", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return bool(keys & set(table))


def _targets_given(rest: list[str]) -> bool:
    flagged = any(a in TARGET_FLAGS or a.startswith(tuple(f + "=" for f in TARGET_FLAGS)) for a in rest)
    return flagged or any(os.environ.get(v) for v in TARGET_ENV) or _config_names_target(rest)


def _scenario(rest: list[str]) -> tuple[str, str | None, bool] | None:
    """(name, its [sim] profile, whether it names targets) of the run's scenario; None when it
    does not load (Locust's start then says why, with the file and key)."""
    from loadkit.workload.errors import ScenarioError
    from loadkit.workload.scenario import load_scenario

    given = _option(rest, "--scenario") or os.environ.get("LOADKIT_SCENARIO") or "uneven_chat"
    try:
        scenario = load_scenario(given)
    except (ScenarioError, OSError):
        return None
    return scenario.name, scenario.sim_profile, bool(scenario.targets)


def plan(sims: list[SimSpec], rest: list[str]) -> tuple[list[SimSpec], list[str]]:
    """The simulators to start, each with its profile, and the lines to print about the choice."""
    from loadkit.sim.config import PROFILES

    scenario = _scenario(rest)
    wanted = scenario[1] if scenario is not None else None
    notes: list[str] = []
    if (
        not sims
        and scenario is not None
        and not scenario[2]
        and not _targets_given(rest)
        and "--worker" not in rest
    ):
        sims = [SimSpec(AUTO_NAME, None)]
        notes.append(f"no --sim, --host or --target given: starting simulator {AUTO_NAME!r} for scenario "
                     f"{scenario[0]!r}")  # fmt: skip
    out = []
    for spec in sims:
        profile = spec.profile or (spec.name if spec.name in PROFILES else wanted or "default")
        if scenario is not None and wanted and profile != wanted:
            have, need = PROFILES[profile].max_model_len, PROFILES[wanted].max_model_len
            if have < need:
                notes.append(f"simulator {spec.name!r} has profile {profile!r} (context {have}); scenario "
                             f"{scenario[0]!r} names profile {wanted!r} (context {need}) in [sim]: requests "
                             f"longer than {have} tokens will get the engine's 400")  # fmt: skip
        out.append(SimSpec(spec.name, profile, spec.port))
    return out, notes
