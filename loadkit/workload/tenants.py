"""Tenants: named shares of a [[parts]] or [sessions] workload, each with its own parts or session
mix, arrival, SLOs and priority.

``[[tenants]]`` entries: ``name`` (no "/"); ``parts`` (names of the scenario's parts this
tenant sends, default all; drawn by the parts' weights); ``priority`` (an integer; lower is
served first under vLLM's priority scheduling; sent the way each target says — the body's
``priority`` field by default, or a header — see loadkit/core/priority.py; omitted = none
sent); ``slos`` (the tenant's own SLO table: its requests are judged against it, not the
run's, in the tenants section); and either ``weight`` (share of the scenario's one arrival
process, default 1) or ``arrival`` (the tenant's own open-loop process: constant, poisson or
gamma with ``rate`` and ``cv``; then every tenant has one and the scenario's
``[arrival] model = "tenants"`` superposes them). A request's label is ``<tenant>/<part
label>``, so every per-label section of the report is per tenant too, and the ``tenants``
section (loadkit/stats/tenantstats.py) groups by tenant.

In a ``[sessions]`` workload a tenant has no ``parts``: its ``weight`` is its share of the
sessions (or its own ``arrival`` starts its sessions, one per arrival), and ``sessions = {...}``
(optional) replaces keys of the scenario's ``[sessions]`` table for its own sessions
(loadkit/workload/tenantsessions.py). Every turn of a tenant's session is labelled
``<tenant>/<turn label>`` and carries the tenant's priority.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadkit.workload.errors import (
    Ctx,
    check_keys,
    check_unique_names,
    get_int,
    get_list,
    get_number,
    get_str,
    get_table,
    require,
)
from loadkit.workload.spec import PartSpec, SessionSpec

TENANT_KEYS = ("name", "weight", "priority", "parts", "slos", "arrival", "sessions")
TENANT_ARRIVALS = ("constant", "poisson", "gamma")

Parser = Callable[[Ctx, Any], dict[str, Any]]
MixParser = Callable[[Ctx, Any, str], SessionSpec]  # (ctx, the tenant's sessions table or None, name)


@dataclass(slots=True)
class TenantSpec:
    name: str
    weight: float = 1.0
    priority: int | None = None
    parts: list[int] = field(default_factory=list)  # indices into the scenario's parts
    slos: dict[str, float] | None = None  # its own; None: the run's
    arrival: dict[str, Any] | None = None  # its own open-loop process; None: the scenario's
    sessions: SessionSpec | None = None  # a [sessions] workload's: the tenant's own session spec


def parse_tenants(
    ctx: Ctx,
    raw: Any,
    parts: list[PartSpec],
    parse_slos: Parser,
    parse_arrival: Parser,
    parse_mix: MixParser | None = None,
) -> list[TenantSpec]:
    """The scenario's parsers for ``slos`` and ``arrival`` are passed in (they live in scenario.py);
    ``parse_mix`` is given for a [sessions] workload (tenantsessions.parse_session_mix, bound)."""
    items = get_list(ctx, raw)
    if not items:
        raise ctx.error("expected at least one tenant")
    if not parts and parse_mix is None:
        raise ctx.error("expected [[parts]] or [sessions]: tenants share out a parts or a sessions workload")
    tenants = [
        _tenant(ctx.at(i), item, parts, parse_slos, parse_arrival, parse_mix) for i, item in enumerate(items)
    ]
    check_unique_names(ctx, [t.name for t in tenants], "tenant")
    own = [t.arrival is not None for t in tenants]
    if any(own) and not all(own):
        raise ctx.at(own.index(False)).error(
            "expected an arrival table: when one tenant has its own arrival, every tenant needs one"
        )
    return tenants


def _tenant(
    ctx: Ctx,
    raw: Any,
    parts: list[PartSpec],
    parse_slos: Parser,
    parse_arrival: Parser,
    parse_mix: MixParser | None,
) -> TenantSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, TENANT_KEYS)
    name = get_str(ctx.at("name"), require(ctx, table, "name"))
    if not name or "/" in name:
        raise ctx.at("name").error(f"expected a non-empty name without '/', got {name!r}")
    spec = TenantSpec(name, get_number(ctx.at("weight"), table.get("weight", 1.0), low=0.0, strict_low=True))
    if "priority" in table:
        spec.priority = get_int(ctx.at("priority"), table["priority"], low=-(2**31), high=2**31 - 1)
    if "slos" in table:
        spec.slos = parse_slos(ctx.at("slos"), table["slos"])
    if "arrival" in table:
        spec.arrival = _arrival(ctx.at("arrival"), table, parse_arrival)
    if parse_mix is not None:
        spec.sessions = _session_mix(ctx, table, name, parse_mix)
        return spec
    if "sessions" in table:
        raise ctx.at("sessions").error(
            "a tenant's session mix applies to a [sessions] workload (this one has "
            "[[parts]]: choose the tenant's parts with parts = [...])"
        )
    spec.parts = _parts(ctx.at("parts"), table, parts)
    return spec


def _session_mix(ctx: Ctx, table: dict[str, Any], name: str, parse_mix: MixParser) -> SessionSpec:
    """A [sessions] workload's tenant: no parts; its mix is the scenario's spec with its keys."""
    if "parts" in table:
        raise ctx.at("parts").error(
            "parts apply to [[parts]] workloads; a tenant of a [sessions] workload "
            "gives its own session mix as sessions = {...}"
        )
    return parse_mix(ctx.at("sessions"), table.get("sessions"), name)


def _arrival(ctx: Ctx, table: dict[str, Any], parse_arrival: Parser) -> dict[str, Any]:
    """An open-loop process of one steady rate: the superposition is the scenario's schedule."""
    if "weight" in table:
        raise ctx.error("give weight or arrival, not both (a tenant's own arrival sets its share)")
    model = get_str(ctx.at("model"), require(ctx, get_table(ctx, table["arrival"]), "model"), TENANT_ARRIVALS)
    if "stages" in table["arrival"]:
        raise ctx.at("stages").error(f"a tenant's own arrival has no stages (one steady {model} rate)")
    return parse_arrival(ctx, table["arrival"])


def _parts(ctx: Ctx, table: dict[str, Any], parts: list[PartSpec]) -> list[int]:
    known = [p.name for p in parts]
    wanted = get_list(ctx, table.get("parts", known))
    chosen = [known.index(get_str(ctx.at(j), part, known)) for j, part in enumerate(wanted)]
    if not chosen:
        raise ctx.error("expected at least one part name")
    return chosen
