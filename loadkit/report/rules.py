"""``--fail-if`` rules for ``loadkit compare``: ``ttft_ms.p99>+10%``, ``tpot_ms.p50>+5``, ``goodput.rps<-10%``.

A rule compares a later run's value with the baseline's (the first run): ``>+10%`` fires when
the value rose by more than 10 %, ``<-10%`` when it fell by more than 10 %, ``>+5`` when it rose
by more than 5 in the metric's own unit (ms for latencies). A rule whose metric was not
measured in either run fires too: a CI gate must not pass because the number went missing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from loadkit.errors import UserError

ALIASES = {
    "goodput": "goodput_per_s", "goodput.rps": "goodput_per_s", "goodput.fraction": "slo.good_fraction",
    "rps": "requests_per_s", "throughput": "output_tokens_per_s", "tokens_per_s": "output_tokens_per_s",
}  # fmt: skip
DERIVED = ("error_rate",)
_RULE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|>|<)\s*([+-]?\d+(?:\.\d+)?)\s*(%|ms)?\s*$")


class RuleError(ValueError, UserError):
    """A rule or metric path that cannot be understood (the user's to fix)."""


def canonical(path: str) -> str:
    return ALIASES.get(path, path)


def metric_value(section: dict[str, Any], path: str) -> float | None:
    """The value at a dotted ``path`` in an engine section; None when not measured.

    Raises RuleError when the path names nothing the report schema has.
    """
    path = canonical(path)
    if path == "error_rate":
        requests, failures = section.get("requests"), section.get("failures")
        return failures / requests if requests else None
    node: Any = section
    for part in path.split("."):
        if node is None:  # e.g. slo.good_fraction when the run gave no SLO: not measured
            return None
        if not isinstance(node, dict) or part not in node:
            raise RuleError(
                f"unknown metric {path!r} (e.g. ttft_ms.p99, tpot_ms.p50, output_tokens_per_s, goodput.rps)"
            )
        node = node[part]
    if node is None:
        return None
    if isinstance(node, bool) or not isinstance(node, int | float):
        raise RuleError(f"metric {path!r} is not a number (add a statistic: {path}.p99)")
    return float(node)


@dataclass(frozen=True)
class Rule:
    text: str
    metric: str
    op: str
    threshold: float
    percent: bool

    def change(self, a: float, b: float) -> float:
        """b − a (absolute) or (b − a) / |a| × 100 (percent); a = 0 gives 0 or ±inf."""
        if not self.percent:
            return b - a
        if a == 0:
            return 0.0 if b == 0 else math.copysign(math.inf, b)
        return (b - a) / abs(a) * 100.0

    def fires(self, a: float | None, b: float | None) -> bool:
        if a is None or b is None:
            return True
        c = self.change(a, b)
        return {">": c > self.threshold, ">=": c >= self.threshold, "<": c < self.threshold,
                "<=": c <= self.threshold}[self.op]  # fmt: skip


def parse_rule(text: str) -> Rule:
    m = _RULE.match(text)
    if not m:
        raise RuleError(
            f"bad --fail-if rule {text!r}: expected METRIC.STAT>+10%, METRIC.STAT>+5 or METRIC<-10%"
        )
    metric, op, number, unit = m.groups()
    return Rule(text.strip(), canonical(metric), op, float(number), unit == "%")
