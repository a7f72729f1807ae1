"""Parsing the synthetic request mix ([[parts]]) and trace replay ([trace]) sections."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadkit.workload.distributions import parse_distribution, read_csv_columns
from loadkit.workload.errors import (
    Ctx,
    check_keys,
    check_unique_names,
    get_bool,
    get_int,
    get_list,
    get_number,
    get_str,
    get_table,
    require,
)
from loadkit.workload.kindparts import parse_kind
from loadkit.workload.paths import resolve_path
from loadkit.workload.session_spec import parse_tools
from loadkit.workload.spec import PartSpec, TraceSpec
from loadkit.workload.tracereader import BAD_ROW_POLICIES, ORDERS
from loadkit.workload.traces import DEFAULT_COLUMNS, FORMATS, load_servegen, load_trace

PART_KEYS = ("name", "weight", "label", "kind", "input", "output", "joint", "tools", "tool_choice")
JOINT_KEYS = ("path", "input_column", "output_column", "min_input", "max_input", "min_output", "max_output")
TRACE_KEYS = (
    "format",
    "path",
    "timestamp_column",
    "input_column",
    "output_column",
    "speed",
    "start_s",
    "end_s",
    "loop",
    "as_sessions",
    "block_tokens",
    "max_input_tokens",
    "max_output_tokens",
    "label",
    "on_bad_row",
    "order",
    "warm_cache",
    "warm_cache_s",
    "reasoning_hint",
)


def resolver(base: Path) -> Callable[[Ctx, str], Path]:
    return lambda ctx, raw: resolve_path(ctx, raw, base)


def parse_parts(ctx: Ctx, raw: Any, base: Path) -> list[PartSpec]:
    items = get_list(ctx, raw)
    if not items:
        raise ctx.error("expected at least one part")
    parts = [_parse_part(ctx.at(i), item, base) for i, item in enumerate(items)]
    check_unique_names(ctx, [p.name for p in parts], "part")
    return parts


def _parse_part(ctx: Ctx, raw: Any, base: Path) -> PartSpec:
    table = get_table(ctx, raw)
    kind = parse_kind(ctx, table, base)  # checks a non-chat part's own keys
    if kind is None:
        check_keys(ctx, table, PART_KEYS)
    name = get_str(ctx.at("name"), require(ctx, table, "name"))
    part = PartSpec(
        name=name,
        label=get_str(ctx.at("label"), table.get("label", name)),
        weight=get_number(ctx.at("weight"), table.get("weight", 1.0), low=0.0, strict_low=True),
        kind=kind,
    )
    if kind is not None:
        return part
    part.tools, part.tool_choice = parse_tools(ctx, table, None)
    if "joint" in table:
        if "input" in table or "output" in table:
            raise ctx.at("joint").error("expected either joint or input/output, not both")
        _parse_joint(ctx.at("joint"), table["joint"], base, part)
        return part
    resolve = resolver(base)
    part.input = parse_distribution(ctx.at("input"), require(ctx, table, "input"), resolve)
    part.output = parse_distribution(ctx.at("output"), require(ctx, table, "output"), resolve)
    return part


def _parse_joint(ctx: Ctx, raw: Any, base: Path, part: PartSpec) -> None:
    """(input, output) pairs drawn together from one row of a trace: they are correlated."""
    table = get_table(ctx, raw)
    check_keys(ctx, table, JOINT_KEYS)
    path = resolve_path(ctx.at("path"), get_str(ctx.at("path"), require(ctx, table, "path")), base)
    cols = (
        get_str(ctx.at("input_column"), table.get("input_column", "num_prefill_tokens")),
        get_str(ctx.at("output_column"), table.get("output_column", "num_decode_tokens")),
    )
    part.joint_in, part.joint_out = read_csv_columns(ctx, path, cols)
    part.joint_clip_in = clip(ctx, table, "min_input", "max_input")
    part.joint_clip_out = clip(ctx, table, "min_output", "max_output")


def clip(ctx: Ctx, table: dict[str, Any], lo_key: str, hi_key: str) -> tuple[float | None, float | None]:
    lo = get_number(ctx.at(lo_key), table[lo_key], low=0.0) if lo_key in table else None
    hi = get_number(ctx.at(hi_key), table[hi_key], low=0.0) if hi_key in table else None
    if lo is not None and hi is not None and hi < lo:
        raise ctx.at(hi_key).error(f"expected {hi_key} >= {lo_key} ({lo:g}), got {hi:g}")
    return lo, hi


def parse_trace(ctx: Ctx, raw: Any, base: Path) -> TraceSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, TRACE_KEYS)
    fmt = get_str(ctx.at("format"), require(ctx, table, "format"), FORMATS)
    path = resolve_path(ctx.at("path"), get_str(ctx.at("path"), require(ctx, table, "path")), base)
    spec = TraceSpec(format=fmt, path=path, columns=_trace_columns(ctx, table, fmt))
    spec.speed = get_number(ctx.at("speed"), table.get("speed", 1.0), low=0.0, strict_low=True)
    spec.start_s = _opt_num(ctx, table, "start_s")
    spec.end_s = _opt_num(ctx, table, "end_s")
    if spec.start_s is not None and spec.end_s is not None and spec.end_s <= spec.start_s:
        raise ctx.at("end_s").error(f"expected end_s > start_s ({spec.start_s:g}), got {spec.end_s:g}")
    spec.loop = get_bool(ctx.at("loop"), table.get("loop", False))
    spec.as_sessions = get_bool(ctx.at("as_sessions"), table.get("as_sessions", False))
    if spec.as_sessions and fmt != "mooncake":
        raise ctx.at("as_sessions").error("expected as_sessions only with format 'mooncake'")
    spec.block_tokens = get_int(ctx.at("block_tokens"), table.get("block_tokens", 512), low=1)
    for key in ("max_input_tokens", "max_output_tokens"):
        if key in table:
            setattr(spec, key, get_int(ctx.at(key), table[key], low=1))
    spec.label = get_str(ctx.at("label"), table.get("label", fmt))
    spec.on_bad_row = get_str(ctx.at("on_bad_row"), table.get("on_bad_row", "refuse"), BAD_ROW_POLICIES)
    if spec.on_bad_row == "pad" and fmt != "mooncake":
        raise ctx.at("on_bad_row").error(
            "expected \"pad\" only with format 'mooncake' (it pads rows whose "
            'hash_ids are too few); use "refuse" or "skip"'
        )
    spec.order = get_str(ctx.at("order"), table.get("order", "time"), ORDERS)
    spec.reasoning_hint = get_bool(ctx.at("reasoning_hint"), table.get("reasoning_hint", True))
    if "reasoning_hint" in table and fmt != "servegen":
        raise ctx.at("reasoning_hint").error(
            "expected reasoning_hint only with format 'servegen' (its reason_ratio gives the split)"
        )
    _parse_warm_cache(ctx, table, spec)
    _load_check(ctx, spec)
    return spec


def _parse_warm_cache(ctx: Ctx, table: dict[str, Any], spec: TraceSpec) -> None:
    spec.warm_cache = get_bool(ctx.at("warm_cache"), table.get("warm_cache", False))
    if "warm_cache_s" in table:
        spec.warm_cache_s = get_number(ctx.at("warm_cache_s"), table["warm_cache_s"], low=0.0)
    if not spec.warm_cache:
        return
    if spec.format != "mooncake" or spec.as_sessions:
        raise ctx.at("warm_cache").error(
            "expected warm_cache only with format 'mooncake' replayed as requests"
        )
    if not spec.start_s:
        raise ctx.at("warm_cache").error(
            "expected start_s > 0: warm-up replays the prefixes seen before the window"
        )
    if spec.loop:
        raise ctx.at("warm_cache").error(
            "expected no loop with warm_cache (a second pass meets a warm cache anyway)"
        )


def _opt_num(ctx: Ctx, table: dict[str, Any], key: str) -> float | None:
    return get_number(ctx.at(key), table[key], low=0.0) if key in table else None


def _trace_columns(ctx: Ctx, table: dict[str, Any], fmt: str) -> tuple[str | None, str, str]:
    if fmt in ("mooncake", "servegen"):
        for key in ("timestamp_column", "input_column", "output_column"):
            if key in table:
                raise ctx.at(key).error(f"expected no column names for format {fmt!r} (its layout is fixed)")
        return (None, "input_length", "output_length")
    t_def, in_def, out_def = DEFAULT_COLUMNS[fmt]
    t_col = table.get("timestamp_column", t_def)
    t_col = None if t_col is None else get_str(ctx.at("timestamp_column"), t_col)
    return (
        t_col,
        get_str(ctx.at("input_column"), table.get("input_column", in_def)),
        get_str(ctx.at("output_column"), table.get("output_column", out_def)),
    )


def _load_check(ctx: Ctx, spec: TraceSpec) -> None:
    """Load once at validation: a bad column or an empty window is a scenario error, not a run error."""
    if spec.format == "servegen":  # request counts per window do not depend on the seed
        trace = load_servegen(ctx.at("path"), spec.path, 0, spec.start_s, spec.end_s)
    else:
        trace = load_trace(
            ctx.at("path"),
            spec.path,
            spec.format,
            spec.columns,
            on_bad_row=spec.on_bad_row,
            order=spec.order,
            block_tokens=spec.block_tokens,
        )
    if trace.t_s is None and (spec.start_s is not None or spec.end_s is not None):
        raise ctx.at("start_s").error("expected a trace with timestamps for a time window")
    if len(trace.window(spec.start_s, spec.end_s)) == 0:
        raise ctx.at("start_s").error("expected the window [start_s, end_s) to hold at least one request")
