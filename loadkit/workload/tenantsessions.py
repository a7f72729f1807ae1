"""Tenants of a ``[sessions]`` workload: each tenant's session mix, and which tenant runs a session.

A session scenario has one session spec, so a tenant's "own session mix" is that spec with some
keys replaced: the tenant's ``sessions = {...}`` table takes any key of ``[sessions]`` except
``count`` (the scenario's total, shared out by the tenants' weights). Each key given replaces
the scenario's key whole (a tenant's ``tool`` table is the tenant's whole tool), and the merged
table is parsed by the same parser as ``[sessions]``, so its rules and messages are the same.
Every turn's label is the tenant's name, "/", then the turn's label (``turn1``, ``turnN``,
``tool`` or the spec's own ``labels``), so the tenants section covers session traffic.

Session ``j``'s tenant is drawn from a Generator of its own, ``[seed, stream, j]``: a pure function
of (seed, j), so every worker's share agrees with the single-worker stream, and the session's own
draws (turns, lengths, think times) are those the untenanted scenario would make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loadkit.workload.errors import Ctx, check_keys, get_table
from loadkit.workload.session_spec import SESSION_KEYS, parse_sessions
from loadkit.workload.spec import SessionSpec

OVERRIDE_KEYS = tuple(k for k in SESSION_KEYS if k != "count")
_TENANT_DRAW = 0x7E55


def parse_session_mix(
    ctx: Ctx, raw: Any, scenario_sessions: dict[str, Any], base: Path, name: str
) -> SessionSpec:
    """The tenant's session spec: the scenario's ``[sessions]`` table with the tenant's keys
    (``raw``; None: none) replacing its own, parsed as ``[sessions]`` is, labels under ``name/``."""
    own = {} if raw is None else get_table(ctx, raw)
    if "count" in own:
        raise ctx.at("count").error(
            "a tenant has no session count (the scenario's sessions.count is shared "
            "out by the tenants' weights)"
        )
    check_keys(ctx, own, OVERRIDE_KEYS)
    spec = parse_sessions(ctx, {**scenario_sessions, **own}, base)
    spec.labels = {k: f"{name}/{v}" for k, v in spec.labels.items()}
    return spec


def tenant_of_session(seed: int, index: int, weights: np.ndarray) -> int:
    """Which tenant runs session ``index``: drawn by ``weights`` (summing to 1)."""
    if len(weights) == 1:
        return 0
    rng = np.random.default_rng([seed & 0xFFFFFFFF, _TENANT_DRAW, index])
    return int(rng.choice(len(weights), p=weights))
