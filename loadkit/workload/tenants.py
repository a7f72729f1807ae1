"""Tenants: named shares of a [[parts]] workload, each with its own part mix and priority.

``[[tenants]]`` entries: ``name`` (no "/"), ``weight`` (share of requests, default 1),
``priority`` (an integer sent as the request body's ``priority`` — vLLM's field; lower is
served first under ``--scheduling-policy priority``; omitted = none sent) and ``parts`` (names
of the scenario's parts this tenant sends, default all; drawn by the parts' weights). A
request's label is ``<tenant>/<part label>``, so every per-label section of the report is per
tenant too, and the ``tenants`` section (loadkit/tenantstats.py) groups by tenant.
"""

from __future__ import annotations

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
from loadkit.workload.spec import PartSpec

TENANT_KEYS = ("name", "weight", "priority", "parts")


@dataclass(slots=True)
class TenantSpec:
    name: str
    weight: float = 1.0
    priority: int | None = None
    parts: list[int] = field(default_factory=list)  # indices into the scenario's parts


def parse_tenants(ctx: Ctx, raw: Any, parts: list[PartSpec]) -> list[TenantSpec]:
    items = get_list(ctx, raw)
    if not items:
        raise ctx.error("expected at least one tenant")
    if not parts:
        raise ctx.error("expected [[parts]]: tenants share out a parts workload")
    tenants = [_tenant(ctx.at(i), item, parts) for i, item in enumerate(items)]
    check_unique_names(ctx, [t.name for t in tenants], "tenant")
    return tenants


def _tenant(ctx: Ctx, raw: Any, parts: list[PartSpec]) -> TenantSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, TENANT_KEYS)
    name = get_str(ctx.at("name"), require(ctx, table, "name"))
    if not name or "/" in name:
        raise ctx.at("name").error(f"expected a non-empty name without '/', got {name!r}")
    spec = TenantSpec(name, get_number(ctx.at("weight"), table.get("weight", 1.0), low=0.0, strict_low=True))
    if "priority" in table:
        spec.priority = get_int(ctx.at("priority"), table["priority"], low=-(2**31), high=2**31 - 1)
    known = [p.name for p in parts]
    wanted = get_list(ctx.at("parts"), table.get("parts", known))
    for j, part in enumerate(wanted):
        part = get_str(ctx.at("parts").at(j), part, known)
        spec.parts.append(known.index(part))
    if not spec.parts:
        raise ctx.at("parts").error("expected at least one part name")
    return spec
