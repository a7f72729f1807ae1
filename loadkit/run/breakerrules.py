"""The circuit breaker's rules (``--breaker``, ``--breaker-dead-after``), parsed once at start.

The rules are part of the run's configuration (run/settings.py ``FailureRules``); the breaker
that applies them to finished requests, and stops the run, is locust/breaker.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

DEFAULT_SPEC = "first=20,window=200,failed=90%,min=50"
FLOOR_SHARE = 5  # a worker's share of the first-N rule never goes below this
DEFAULT_DEAD_AFTER_S = 10.0


@dataclass(frozen=True, slots=True)
class BreakerRules:
    first: int = 20  # 0: rule off
    window: int = 200  # 0: rule off
    failed_pct: float = 90.0
    min_count: int = 50
    dead_after_s: float = DEFAULT_DEAD_AFTER_S  # 0: rule off

    @classmethod
    def parse(cls, text: str | None) -> BreakerRules | None:
        """``--breaker``: "off", or KEY=VALUE pairs over the defaults. ValueError naming the
        option and the key for anything else."""
        text = (text or "").strip()
        if text.lower() in ("off", "false", "no", "0", "none"):
            return None
        values: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or key not in ("first", "window", "failed", "min"):
                raise ValueError(f"--breaker: {item!r}: expected off, or first=N,window=N,failed=PCT%,min=N")
            values[key] = _breaker_number(key, raw.strip().rstrip("%"))
        d = cls()
        rules = cls(int(values.get("first", d.first)), int(values.get("window", d.window)),
                    values.get("failed", d.failed_pct), int(values.get("min", d.min_count)))  # fmt: skip
        if not 0 <= rules.failed_pct < 100:
            raise ValueError(f"--breaker: failed={rules.failed_pct:g}%: must be in [0, 100)")
        return rules

    @classmethod
    def from_options(cls, options: Any) -> BreakerRules | None:
        """``--breaker`` and ``--breaker-dead-after``; None when the breaker is off."""
        rules = cls.parse(getattr(options, "breaker", None))
        if rules is None:
            return None
        raw = getattr(options, "breaker_dead_after", DEFAULT_DEAD_AFTER_S)
        try:
            dead_after = float(DEFAULT_DEAD_AFTER_S if raw is None or raw == "" else raw)
        except (TypeError, ValueError):
            raise ValueError(f"--breaker-dead-after: {raw!r} is not a number of seconds") from None
        if not 0 <= dead_after < float("inf"):
            raise ValueError(
                f"--breaker-dead-after: must be a finite number of seconds >= 0 (0: off), got {raw!r}"
            )
        return replace(rules, dead_after_s=dead_after)

    def for_share(self, index: int, workers: int) -> BreakerRules:
        """Worker ``index`` of ``workers`` judges its share of the first N (at least 5 of
        them), so a dead target costs about N requests however many workers there are."""
        if workers <= 1 or not self.first:
            return self
        share = self.first // workers + (1 if index < self.first % workers else 0)
        return replace(self, first=max(min(self.first, FLOOR_SHARE), share))


def _breaker_number(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"--breaker: {key}={raw!r} is not a number") from None
    if not value >= 0 or value == float("inf") or (key != "failed" and value != int(value)):
        raise ValueError(f"--breaker: {key}={raw!r}: expected a whole number >= 0")
    return value
