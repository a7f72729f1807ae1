"""The superposed schedule of tenants that each give their own arrival process.

Each tenant's process is drawn with arrival.arrival_offsets from its own seed (the scenario's
seed and the tenant's index), so adding or retuning one tenant leaves the others' arrivals as
they were. The merged schedule, in time order, is item i → (offset_s, tenant index); it ends
at the scenario's duration_s or after max_requests arrivals, whichever comes first. Workers
take items i ≡ w (mod W) as everywhere else, so their union is exactly this schedule.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from loadkit.workload.arrival import Stage, arrival_offsets, stages_from_spec

if TYPE_CHECKING:
    from loadkit.workload.scenario import Scenario

STAGE = "tenants"  # the delivered-load report's stage of these arrivals
_TENANT_STREAM = 0x7E4A


def tenant_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, _TENANT_STREAM, index]).generate_state(1)[0])


def _one(scenario: Scenario, index: int, end_s: float) -> Iterator[tuple[float, int]]:
    spec = scenario.tenants[index].arrival
    assert spec is not None
    stage = stages_from_spec(spec)[0]
    stages = [Stage(end_s, stage.rate, stage.cv, None, STAGE)]
    return ((t, index) for t, _ in arrival_offsets(spec["model"], stages, tenant_seed(scenario.seed, index)))


def tenant_schedule(scenario: Scenario) -> list[tuple[float, int]]:
    """All (offset_s, tenant index) arrivals of the run, in time order (ties: lower index first)."""
    end_s = scenario.duration_s if scenario.duration_s is not None else math.inf
    streams = [_one(scenario, k, end_s) for k in range(len(scenario.tenants))]
    merged = heapq.merge(*streams)
    if scenario.max_requests is not None:
        return list(itertools.islice(merged, scenario.max_requests))
    return list(merged)
