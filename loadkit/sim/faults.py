"""Fault injection: which requests misbehave, how, and where in the stream.

Syntax (``--fault`` may repeat)::

    NAME=FRACTION          e.g. drop_mid_stream=0.1, http_429=0.05
    NAME=ARG:FRACTION      e.g. stall_after=5:0.1 (stall after 5 tokens, on 10% of requests)

A request can force exactly one fault with the header ``X-Loadkit-Fault: NAME`` or
``X-Loadkit-Fault: NAME=ARG``. Draws come from a generator seeded by ``--seed`` and the
request's arrival number, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from loadkit.sim.config import ConfigError

# name -> what ARG means (None: the fault takes no argument).
FAULTS: dict[str, str | None] = {
    "drop_mid_stream": "tokens sent before the connection is reset (default: half)",
    "close_early": "tokens sent before the stream ends without the engine's normal end",
    "malformed": "tokens sent before one event with invalid JSON",
    "error_event": "tokens sent before an in-band error event ends the stream",
    "http_429": "Retry-After seconds (default 1)",
    "http_503": None,
    "http_500": None,
    "stall_after": "tokens sent before the stream stalls (default 1)",
    "trickle": "bytes per write when trickling (default 1)",
}
HTTP_FAULTS = {"http_429": 429, "http_503": 503, "http_500": 500}


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    arg: int | None = None


@dataclass(slots=True)
class FaultPlan:
    """Per-request fractions (summing to <= 1) and optional arguments of each fault."""

    fractions: dict[str, float] = field(default_factory=dict)
    args: dict[str, int] = field(default_factory=dict)

    def choose(self, rng: random.Random) -> Fault | None:
        """Pick at most one fault for a request from one uniform draw."""
        if not self.fractions:
            return None
        u = rng.random()
        for name, frac in self.fractions.items():
            if u < frac:
                return Fault(name, self.args.get(name))
            u -= frac
        return None


def parse_fault_spec(spec: str) -> tuple[str, int | None, float]:
    """``NAME=FRACTION`` or ``NAME=ARG:FRACTION`` -> (name, arg, fraction)."""
    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not sep or name not in FAULTS:
        raise ConfigError(f"--fault {spec!r}: expected NAME=FRACTION with NAME one of {', '.join(FAULTS)}")
    arg_text, colon, frac_text = rest.rpartition(":")
    arg = _parse_arg(spec, name, arg_text) if colon else None
    try:
        frac = float(frac_text)
    except ValueError:
        raise ConfigError(f"--fault {spec!r}: fraction {frac_text!r} is not a number") from None
    if not 0.0 <= frac <= 1.0:
        raise ConfigError(f"--fault {spec!r}: fraction must be within [0, 1]")
    return name, arg, frac


def _parse_arg(spec: str, name: str, text: str) -> int:
    if FAULTS[name] is None:
        raise ConfigError(f"--fault {spec!r}: {name} takes no argument")
    try:
        arg = int(text)
    except ValueError:
        raise ConfigError(f"--fault {spec!r}: argument {text!r} is not an integer") from None
    if arg < 0 or (name == "trickle" and arg < 1):
        raise ConfigError(f"--fault {spec!r}: argument must be >= {1 if name == 'trickle' else 0}")
    return arg


def build_plan(specs: list[str]) -> FaultPlan:
    plan = FaultPlan()
    for spec in specs:
        name, arg, frac = parse_fault_spec(spec)
        plan.fractions[name] = frac
        if arg is not None:
            plan.args[name] = arg
    total = sum(plan.fractions.values())
    if total > 1.0 + 1e-9:
        raise ConfigError(f"--fault fractions add up to {total:g}; at most 1 is possible")
    return plan


def fault_from_header(value: str) -> Fault:
    """Parse ``X-Loadkit-Fault``; raises ValueError (the server answers 400)."""
    name, sep, arg_text = value.strip().partition("=")
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r} in X-Loadkit-Fault (known: {', '.join(FAULTS)})")
    if not sep:
        return Fault(name)
    try:
        return Fault(name, _parse_arg(value, name, arg_text))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def fault_point(fault: Fault, n_out: int) -> int:
    """How many tokens are sent normally before a mid-stream fault strikes; -1 for `trickle`,
    which misbehaves from the first byte (its argument is bytes per write, not a token count)."""
    if fault.name == "trickle":
        return -1
    if fault.arg is not None:
        return fault.arg
    if fault.name == "stall_after":
        return 1
    return max(1, n_out // 2)
