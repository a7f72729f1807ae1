"""Expected against realised reasoning share, per target: what a ServeGen reasoning trace's
``reason_ratio`` said of each request's output (the workload's expected split,
workload/reasoning.py) beside what the target's stream counted as reasoning.

Shares are token-weighted: Σ reasoning tokens / Σ output tokens. The expected share is given
over every request that carried a split and over the ``measured`` ones (ok, with a reasoning
count from usage or the channel marks), the realised share over the measured ones only, so
``share_error`` compares like with like. A real server decides its own reasoning length: the
comparison says how far the target is from the trace, it is not a fault of the client.
"""

from __future__ import annotations

from typing import Any

from loadkit.types import OK

NOT_REASONING = (
    "the target streamed no reasoning tokens: reason_ratio cannot apply to it (its output was all answer)"
)
NOT_MEASURED = (
    "the target's replies do not tell reasoning from answer tokens: the realised share is not measured"
)


class ReasoningSplit:
    """Sums over the requests of one target that carried an expected reasoning split."""

    FIELDS = ("requests", "expected", "asked", "measured", "measured_expected", "measured_asked",
              "reasoning", "output")  # fmt: skip

    def __init__(self) -> None:
        self.requests = self.expected = self.asked = 0
        self.measured = self.measured_expected = self.measured_asked = 0
        self.reasoning = self.output = 0

    def add(self, r: Any) -> None:
        expected = getattr(r, "expected_reasoning_tokens", None)
        if expected is None or r.max_tokens is None:
            return
        self.requests += 1
        self.expected += expected
        self.asked += r.max_tokens
        if r.outcome != OK or r.n_reasoning is None or r.n_out is None:
            return
        self.measured += 1
        self.measured_expected += expected
        self.measured_asked += r.max_tokens
        self.reasoning += r.n_reasoning
        self.output += r.n_out

    def merge(self, other: ReasoningSplit) -> None:
        for name in self.FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_wire(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.FIELDS}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ReasoningSplit:
        out = cls()
        for name in cls.FIELDS:
            setattr(out, name, int(data.get(name, 0)))
        return out

    def report(self) -> dict[str, Any] | None:
        """The ``reasoning`` entry of a target's lengths; None when no request carried a split."""
        if not self.requests:
            return None
        expected_measured = _share(self.measured_expected, self.measured_asked)
        realised = _share(self.reasoning, self.output)
        note = None
        if not self.measured:
            note = NOT_MEASURED
        elif not self.reasoning and self.measured_expected:
            note = NOT_REASONING
        return {
            "requests": self.requests,
            "expected_share": _share(self.expected, self.asked),
            "expected_reasoning_tokens_mean": self.expected / self.requests,
            "measured": self.measured,
            "expected_share_measured": expected_measured,
            "realised_share": realised,
            "realised_reasoning_tokens_mean": self.reasoning / self.measured if self.measured else None,
            "share_error": None
            if realised is None or expected_measured is None
            else realised - expected_measured,
            "note": note,
        }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def console_lines(by_target: dict[str, Any]) -> list[str]:
    """One line per target whose requests carried an expected split (report.json's lengths)."""
    lines = []
    for engine, section in sorted(by_target.items()):
        split = (section or {}).get("reasoning")
        if not split:
            continue
        line = (
            f"reasoning {engine}: expected share {_pct(split['expected_share_measured'] or split['expected_share'])}"
            f" (reason_ratio), realised {_pct(split['realised_share'])} over {split['measured']} of "
            f"{split['requests']} requests"
        )
        if split["share_error"] is not None:
            line += f", {split['share_error'] * 100:+.1f} points"
        if split["note"]:
            line += f": {split['note']}"
        lines.append(line)
    return lines


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"
