"""Parsing the [sessions] section: multi-turn agent sessions (see docs/sessions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.workload.distributions import Distribution, parse_distribution
from loadkit.workload.errors import Ctx, check_keys, get_int, get_number, get_str, get_table, require
from loadkit.workload.paths import resolve_path
from loadkit.workload.spec import SessionSpec, SystemPoolSpec, ToolSpec

SESSION_KEYS = ("count", "turns", "user_tokens", "output_tokens", "think_time_s", "system_prompts", "tool",
                "context", "labels")
SYSTEM_KEYS = ("count", "tokens", "popularity", "zipf_s")
TOOL_KEYS = ("probability", "call_tokens", "result_tokens", "latency_s", "format")
CONTEXT_KEYS = ("max_tokens", "policy")
LABEL_KEYS = ("first", "next", "tool")


def parse_sessions(ctx: Ctx, raw: Any, base: Path) -> SessionSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, SESSION_KEYS)
    spec = SessionSpec(
        turns=_dist(ctx, table, "turns", base),
        user_tokens=_dist(ctx, table, "user_tokens", base),
        output_tokens=_dist(ctx, table, "output_tokens", base),
        think_time_s=_dist(ctx, table, "think_time_s", base, integer=False, default=0.0),
    )
    if "count" in table:
        spec.count = get_int(ctx.at("count"), table["count"], low=1)
    if "system_prompts" in table:
        spec.system = _parse_system(ctx.at("system_prompts"), table["system_prompts"], base)
    if "tool" in table:
        spec.tool = _parse_tool(ctx.at("tool"), table["tool"], base)
    if "context" in table:
        _parse_context(ctx.at("context"), table["context"], spec)
    if "labels" in table:
        spec.labels = _parse_labels(ctx.at("labels"), table["labels"], spec.labels)
    return spec


def _dist(ctx: Ctx, table: dict[str, Any], key: str, base: Path, *, integer: bool = True,
          default: float | None = None) -> Distribution:
    raw = table.get(key, default) if default is not None else require(ctx, table, key)
    return parse_distribution(ctx.at(key), raw, lambda c, p: resolve_path(c, p, base), integer=integer)


def _parse_system(ctx: Ctx, raw: Any, base: Path) -> SystemPoolSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, SYSTEM_KEYS)
    pool = SystemPoolSpec(count=get_int(ctx.at("count"), require(ctx, table, "count"), low=1),
                          tokens=_dist(ctx, table, "tokens", base))
    pool.popularity = get_str(ctx.at("popularity"), table.get("popularity", "uniform"), ("uniform", "zipf"))
    pool.zipf_s = get_number(ctx.at("zipf_s"), table.get("zipf_s", 1.0), low=0.0, strict_low=True)
    return pool


def _parse_tool(ctx: Ctx, raw: Any, base: Path) -> ToolSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, TOOL_KEYS)
    return ToolSpec(
        probability=get_number(ctx.at("probability"), require(ctx, table, "probability"), low=0.0, high=1.0),
        call_tokens=_dist(ctx, table, "call_tokens", base),
        result_tokens=_dist(ctx, table, "result_tokens", base),
        latency_s=_dist(ctx, table, "latency_s", base, integer=False, default=0.0),
        format=get_str(ctx.at("format"), table.get("format", "text"), ("text", "openai")),
    )


def _parse_context(ctx: Ctx, raw: Any, spec: SessionSpec) -> None:
    table = get_table(ctx, raw)
    check_keys(ctx, table, CONTEXT_KEYS)
    spec.context_max_tokens = get_int(ctx.at("max_tokens"), require(ctx, table, "max_tokens"), low=1)
    spec.context_policy = get_str(ctx.at("policy"), table.get("policy", "stop"), ("stop", "truncate"))


def _parse_labels(ctx: Ctx, raw: Any, defaults: dict[str, str]) -> dict[str, str]:
    table = get_table(ctx, raw)
    check_keys(ctx, table, LABEL_KEYS)
    return {k: get_str(ctx.at(k), table.get(k, v)) for k, v in defaults.items()}
