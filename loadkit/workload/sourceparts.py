"""What a RequestSource draws on, kept apart from the stream logic: the system-prompt pool,
a part's lengths and tools, and the trace a scenario names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from loadkit.types import GenerationRequest
from loadkit.workload.errors import Ctx
from loadkit.workload.traces import Trace, load_servegen, load_trace

if TYPE_CHECKING:
    from loadkit.workload.scenario import Scenario
    from loadkit.workload.source import RequestSource

_SYSTEM = 0x5157  # the system-prompt stream of the scenario's seed


class SystemPool:
    """The scenario's pool of system prompts: texts and lengths fixed by (seed, index)."""

    def __init__(self, source: RequestSource, spec: Any, salt: int = 0) -> None:
        """``salt``: 0 for the scenario's pool; a tenant's own pool draws texts of its own."""
        self.source, self.spec, self.salt = source, spec, salt
        ranks = np.arange(1, spec.count + 1, dtype=float)
        weights = ranks**-spec.zipf_s if spec.popularity == "zipf" else np.ones(spec.count)
        self.p = weights / weights.sum()
        self._texts: dict[int, tuple[str, int]] = {}
        self._used: set[int] = set()

    def pick(self, session_index: int) -> tuple[str, int, bool]:
        """(text, tokens, seen before by this worker) of the system prompt for a session."""
        seed, salt = self.source.seed & 0xFFFFFFFF, self.salt
        rng = np.random.default_rng([seed, _SYSTEM, session_index, *([salt] if salt else [])])
        k = int(rng.choice(self.spec.count, p=self.p))
        if k not in self._texts:
            n = self.spec.tokens.sample_int(
                np.random.default_rng([seed, _SYSTEM, 1 << 30, k, *([salt] if salt else [])])
            )
            key = (_SYSTEM, k, salt) if salt else (_SYSTEM, k)
            self._texts[k] = (self.source.builder.text(self.source.text_seed, key, n), n)
        seen = k in self._used
        self._used.add(k)
        return (*self._texts[k], seen)


def with_tools(req: GenerationRequest, part: Any) -> GenerationRequest:
    """A part's ``tools`` / ``tool_choice`` into the request body (chat endpoints)."""
    if part.tools is not None:
        req.extra_body["tools"] = part.tools
        req.extra_body["tool_choice"] = part.tool_choice
    return req


def part_lengths(part: Any, rng: np.random.Generator) -> tuple[int, int]:
    if part.joint_in is not None:
        row = int(rng.integers(len(part.joint_in)))
        return (clip(part.joint_in[row], part.joint_clip_in), clip(part.joint_out[row], part.joint_clip_out))
    return part.input.sample_int(rng), part.output.sample_int(rng)


def clip(value: float, bounds: tuple[float | None, float | None]) -> int:
    lo, hi = bounds
    if lo is not None:
        value = max(value, lo)
    if hi is not None:
        value = min(value, hi)
    return max(int(round(value)), 1)


def loop_span(trace: Trace, start_s: float | None, end_s: float | None) -> float:
    """How long one pass of the trace lasts: the window, else last arrival plus one mean gap."""
    if trace.t_s is None or len(trace) == 0:
        return 0.0
    if end_s is not None:
        return end_s - (start_s or 0.0)
    last = float(trace.t_s.max())
    return last + (last / (len(trace) - 1) if len(trace) > 1 and last > 0 else 1.0)


def load_trace_for(scenario: Scenario) -> Trace:
    spec = scenario.trace
    assert spec is not None
    if spec.format == "servegen":
        return load_servegen(
            Ctx(str(scenario.path), "trace.path"), spec.path, scenario.seed, spec.start_s, spec.end_s
        )
    return load_trace(
        Ctx(str(scenario.path), "trace.path"),
        spec.path,
        spec.format,
        spec.columns,
        on_bad_row=spec.on_bad_row,
        order=spec.order,
        block_tokens=spec.block_tokens,
    )
