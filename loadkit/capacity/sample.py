"""A length distribution and its prefix sharing: what every source of lengths returns
(``lengths`` reads the files, ``scenario`` walks a scenario), below both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(slots=True)
class PrefixSharing:
    """Prompt tokens in total vs. stored once when equal prefixes are shared."""

    method: str
    prompt_tokens: int
    unique_tokens: int
    # All tokens of all sequences (prompt + output), to express the saving against the whole cache.
    sequence_tokens: int

    @property
    def shared_tokens(self) -> int:
        return self.prompt_tokens - self.unique_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "prompt_tokens": self.prompt_tokens,
            "unique_prompt_tokens": self.unique_tokens,
            "shared_tokens": self.shared_tokens,
            "saved_fraction_of_prompt": _ratio(self.shared_tokens, self.prompt_tokens),
            "saved_fraction_of_kv": _ratio(self.shared_tokens, self.sequence_tokens),
        }


@dataclass(slots=True)
class LengthSample:
    lengths: np.ndarray
    source: str
    kind: str
    skipped: dict[str, int] = field(default_factory=dict)
    prefix: PrefixSharing | None = None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "kind": self.kind, "count": int(self.lengths.size)}
        out["skipped"] = dict(self.skipped)
        out.update(length_stats(self.lengths))
        return out


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def length_stats(lengths: np.ndarray) -> dict[str, Any]:
    """Sum, mean and percentiles of the lengths; None where there are none."""
    if lengths.size == 0:
        return {k: None for k in ("tokens", "mean", "min", "p50", "p90", "p99", "max")}
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {
        "tokens": int(lengths.sum()),
        "mean": float(lengths.mean()),
        "min": int(lengths.min()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(lengths.max()),
    }
