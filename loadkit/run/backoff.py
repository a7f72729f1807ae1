"""Closed loop: a virtual user whose request failed fast waits before its next one.

A closed-loop user sends its next request as soon as the last one ends; when the server
answers every request with an error within microseconds (connection refused, a 4xx), that is
a hot loop: thousands of requests a second, a huge raw log, and a client so busy that the
self-check marks every figure suspect. After a failure faster than ``threshold_s`` the user
waits with capped exponential backoff and "equal jitter": the k-th fast failure in a row waits
between b/2 and b seconds, b = min(cap, base * 2**(k-1)). The lower bound keeps the request
rate bounded (a user sends at most one request per base/2, 1.5 base, 3.5 base, ... seconds);
the jitter keeps users that failed together from retrying together. A success resets the
count; a slow failure neither waits nor resets (it is no hot loop). Open loop keeps its
schedule: there the failures are only counted (and seen by the circuit breaker).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from loadkit.records import RequestRecord
from loadkit.types import CANCELLED, OK

DEFAULT_THRESHOLD_MS = 50.0
DEFAULT_BASE_S = 0.05
DEFAULT_CAP_S = 5.0


@dataclass(frozen=True, slots=True)
class BackoffRules:
    threshold_s: float = DEFAULT_THRESHOLD_MS / 1e3
    base_s: float = DEFAULT_BASE_S
    cap_s: float = DEFAULT_CAP_S

    @classmethod
    def from_options(cls, options: Any) -> BackoffRules | None:
        """None when --no-backoff; ValueError naming the option for a bad value."""
        if getattr(options, "backoff", True) in (False, "false", "False"):
            return None
        threshold = _number(options, "backoff_threshold_ms", DEFAULT_THRESHOLD_MS, "--backoff-threshold-ms")
        cap = _number(options, "backoff_max", DEFAULT_CAP_S, "--backoff-max")
        if not cap > 0:
            raise ValueError(f"--backoff-max: must be > 0 seconds, got {cap:g}")
        return cls(threshold / 1e3, min(DEFAULT_BASE_S, cap), cap)

    def wait_s(self, streak: int, rng: random.Random) -> float:
        """The wait after the ``streak``-th fast failure in a row (streak >= 1)."""
        bound = min(self.cap_s, self.base_s * 2.0 ** min(streak - 1, 60))
        return bound / 2 + rng.uniform(0.0, bound / 2)


def _number(options: Any, name: str, default: float, flag: str) -> float:
    value = getattr(options, name, default)
    try:
        number = float(default if value is None or value == "" else value)
    except (TypeError, ValueError):
        raise ValueError(f"{flag}: {value!r} is not a number") from None
    if not number >= 0 or number == float("inf"):
        raise ValueError(f"{flag}: must be a finite number >= 0, got {value!r}")
    return number


class Backoff:
    """One virtual user's backoff state."""

    __slots__ = ("rules", "streak", "rng")

    def __init__(self, rules: BackoffRules, rng: random.Random | None = None) -> None:
        self.rules = rules
        self.streak = 0
        self.rng = rng or random.Random()

    def after(self, record: RequestRecord) -> float:
        """Seconds to wait before this user's next request, given how the last one ended."""
        if record.outcome == OK:
            self.streak = 0
            return 0.0
        if record.outcome == CANCELLED or record.t_end_ns is None or not record.t_send_ns:
            return 0.0
        if (record.t_end_ns - record.t_send_ns) / 1e9 > self.rules.threshold_s:
            return 0.0
        self.streak += 1
        return self.rules.wait_s(self.streak, self.rng)
