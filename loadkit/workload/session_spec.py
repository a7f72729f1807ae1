"""Parsing the [sessions] section: multi-turn agent sessions (see docs/sessions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadkit.workload.distributions import Distribution, parse_distribution
from loadkit.workload.errors import Ctx, check_keys, get_int, get_number, get_str, get_table, require
from loadkit.workload.paths import resolve_path
from loadkit.workload.spec import SessionSpec, SystemPoolSpec, ToolSpec

SESSION_KEYS = (
    "count",
    "turns",
    "user_tokens",
    "output_tokens",
    "think_time_s",
    "system_prompts",
    "tool",
    "context",
    "labels",
)
SYSTEM_KEYS = ("count", "tokens", "popularity", "zipf_s")
TOOL_KEYS = ("probability", "call_tokens", "result_tokens", "latency_s", "format", "tools", "tool_choice")
# format = "server" sends this tool with every request unless the scenario gives its own `tools`.
DEFAULT_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look something up and return what was found.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
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


def _dist(
    ctx: Ctx,
    table: dict[str, Any],
    key: str,
    base: Path,
    *,
    integer: bool = True,
    default: float | None = None,
) -> Distribution:
    raw = table.get(key, default) if default is not None else require(ctx, table, key)
    return parse_distribution(ctx.at(key), raw, lambda c, p: resolve_path(c, p, base), integer=integer)


def _parse_system(ctx: Ctx, raw: Any, base: Path) -> SystemPoolSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, SYSTEM_KEYS)
    pool = SystemPoolSpec(
        count=get_int(ctx.at("count"), require(ctx, table, "count"), low=1),
        tokens=_dist(ctx, table, "tokens", base),
    )
    pool.popularity = get_str(ctx.at("popularity"), table.get("popularity", "uniform"), ("uniform", "zipf"))
    pool.zipf_s = get_number(ctx.at("zipf_s"), table.get("zipf_s", 1.0), low=0.0, strict_low=True)
    return pool


def _parse_tool(ctx: Ctx, raw: Any, base: Path) -> ToolSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, TOOL_KEYS)
    fmt = get_str(ctx.at("format"), table.get("format", "text"), ("text", "openai", "server"))
    if fmt == "server":
        return _parse_server_tool(ctx, table, base)
    return ToolSpec(
        probability=get_number(ctx.at("probability"), require(ctx, table, "probability"), low=0.0, high=1.0),
        call_tokens=_dist(ctx, table, "call_tokens", base),
        result_tokens=_dist(ctx, table, "result_tokens", base),
        latency_s=_dist(ctx, table, "latency_s", base, integer=False, default=0.0),
        format=fmt,
    )


def _parse_server_tool(ctx: Ctx, table: dict[str, Any], base: Path) -> ToolSpec:
    """format = "server": the server's own streamed tool calls decide; no probability or call size."""
    for key in ("probability", "call_tokens"):
        if key in table:
            raise ctx.at(key).error(
                f'{key!r} does not apply with format = "server" (the server decides when to call)'
            )
    tools, choice = parse_tools(ctx, table, [DEFAULT_TOOL])
    return ToolSpec(
        probability=0.0,
        call_tokens=_dist(ctx, {"call_tokens": 1}, "call_tokens", base),
        result_tokens=_dist(ctx, table, "result_tokens", base),
        latency_s=_dist(ctx, table, "latency_s", base, integer=False, default=0.0),
        format="server",
        definitions=tools,
        tool_choice=choice,
    )


def parse_tools(ctx: Ctx, table: dict[str, Any], default: list[dict[str, Any]] | None) -> tuple[Any, Any]:
    """``tools`` (OpenAI tool definitions) and ``tool_choice`` of a table, checked."""
    tools = table.get("tools", default)
    if tools is not None and (
        not isinstance(tools, list) or not tools or not all(_is_tool(t) for t in tools)
    ):
        raise ctx.at("tools").error(
            'must be a non-empty list of {type = "function", function = {name = ...}} tables'
        )
    choice = table.get("tool_choice", "auto" if tools else None)
    if choice is not None and not (choice in ("auto", "required", "none") or isinstance(choice, dict)):
        raise ctx.at("tool_choice").error(f'must be "auto", "required", "none" or a table; got {choice!r}')
    if choice is not None and tools is None:
        raise ctx.at("tool_choice").error("needs tools")
    return tools, choice


def _is_tool(tool: Any) -> bool:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return isinstance(fn, dict) and isinstance(fn.get("name"), str)


def _parse_context(ctx: Ctx, raw: Any, spec: SessionSpec) -> None:
    table = get_table(ctx, raw)
    check_keys(ctx, table, CONTEXT_KEYS)
    spec.context_max_tokens = get_int(ctx.at("max_tokens"), require(ctx, table, "max_tokens"), low=1)
    spec.context_policy = get_str(ctx.at("policy"), table.get("policy", "stop"), ("stop", "truncate"))


def _parse_labels(ctx: Ctx, raw: Any, defaults: dict[str, str]) -> dict[str, str]:
    table = get_table(ctx, raw)
    check_keys(ctx, table, LABEL_KEYS)
    return {k: get_str(ctx.at(k), table.get(k, v)) for k, v in defaults.items()}
