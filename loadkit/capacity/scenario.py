"""Adapter from a scenario file (loadkit.workload) to sequence lengths and planned prefix sharing.

``loadkit.workload`` is imported only when a scenario is asked for, and any shape mismatch
becomes one clear CapacityError.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.sample import LengthSample, PrefixSharing

# Sessions need a reply to build the next turn; this one stands in for the model's answer.
# Its token count is approximate, like any text without the server's tokenizer.
_REPLY_WORD = " ok"
_MAX_TURNS_PER_SESSION = 1_000


def lengths_from_scenario(path: str | Path, n: int = 10_000) -> LengthSample:
    """Lengths of the first n requests a scenario would send (sessions: one sequence per turn).

    Needs ``loadkit.workload.load_scenario``; the import is guarded so the planner works
    without it for every other source.
    """
    path = Path(path)
    source = _request_source(path)
    walk = _Walk()
    try:
        while walk.requests < n:
            item = source.next_item()
            if item is None:
                break
            walk.visit(item)
    except (ValueError, OSError) as exc:  # ScenarioError is a ValueError; a trace file may vanish
        raise CapacityError(str(exc) or f"{path}: cannot build requests") from None
    arr = np.asarray(walk.lengths, dtype=np.int64)
    prefix = None
    if walk.expected_seen:
        prefix = PrefixSharing(
            "scenario expected_cached_tokens", walk.prompt, walk.prompt - walk.cached, int(arr.sum())
        )
    return LengthSample(arr, str(path), "scenario", dict(walk.skipped), prefix)


def _request_source(path: Path) -> Any:
    try:
        from loadkit.workload import load_scenario
    except ImportError:
        raise CapacityError(
            f"{path}: scenario files need loadkit.workload.load_scenario, not available in this install"
        ) from None
    try:
        scenario = load_scenario(path)
    except Exception as exc:  # ScenarioError and friends: already one line naming file and key
        raise CapacityError(str(exc) or f"{path}: invalid scenario") from None
    return scenario.request_source(worker_index=0, worker_count=1)


class _Walk:
    """Collects one sequence length per request; for sessions, one per turn."""

    def __init__(self) -> None:
        self.lengths: list[int] = []
        self.skipped: Counter[str] = Counter()
        self.requests = self.prompt = self.cached = 0
        self.expected_seen = False

    def visit(self, item: Any) -> None:
        if hasattr(item, "next_request"):
            self._session(item)
        else:
            self._request(item)

    def _session(self, session: Any) -> None:
        req = session.next_request(None, True)
        turns = 0
        while req is not None and turns < _MAX_TURNS_PER_SESSION:
            self._request(req)
            turns += 1
            req = session.next_request(_REPLY_WORD * max(1, int(req.max_tokens)), True)

    def _request(self, req: Any) -> None:
        self.requests += 1
        n_in = getattr(req, "n_in_target", None)
        if n_in is None:
            self.skipped["request without n_in_target"] += 1
            return
        self.lengths.append(int(n_in) + int(req.max_tokens))
        self.prompt += int(n_in)
        expected = getattr(req, "expected_cached_tokens", None)
        if expected is not None:
            self.cached += min(int(expected), int(n_in))
            self.expected_seen = True
