"""The plan as a console table, and as an HTML section the run report can embed."""

from __future__ import annotations

from typing import Any

from loadkit.capacity.units import format_bytes

_VARIANT_NAMES = {"mha": "MHA", "gqa": "GQA", "mqa": "MQA", "mla": "MLA"}


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{int(round(value)):,}" if isinstance(value, int | float) else str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _grid(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell; the first column left-aligned, the rest right."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  " + "  ".join(parts).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def render_table(plan: dict[str, Any]) -> str:
    """The plan as plain text: model, KV per token per variant, paging, prefix sharing, fit."""
    sections = [_model_lines(plan), _kv_lines(plan), _length_lines(plan), _paging_lines(plan)]
    sections += [_prefix_lines(plan), _fit_lines(plan), _warning_lines(plan)]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"


def _model_lines(plan: dict[str, Any]) -> list[str]:
    m, w = plan["model"], plan["weights"]
    shape = f"{m['layers']} layers, {m['heads']} heads, {m['kv_heads']} KV heads, head dim {m['head_dim']}"
    if m["kv_lora_rank"]:
        shape += f", kv_lora_rank {m['kv_lora_rank']} + rope {m['rope_head_dim']}"
    params = f"{w['params'] / 1e9:.2f}B params"
    if w["active_params"] != w["params"]:
        params += f" ({w['active_params'] / 1e9:.2f}B active per token)"
    return [
        f"model {m['name']} ({m['source']}): {_VARIANT_NAMES[m['attention']]}, {shape}",
        f"weights: {params} in {w['dtype']} = {format_bytes(w['bytes'])}",
    ]


def _kv_lines(plan: dict[str, Any]) -> list[str]:
    dtypes = plan["kv_per_token"]["dtypes"]
    headers = ["KV bytes/token", "kv heads", *dtypes, "vs MHA"]
    rows = []
    for v in plan["kv_per_token"]["variants"]:
        name = _VARIANT_NAMES[v["variant"]] + (" (configured)" if v["configured"] else "")
        sizes = [format_bytes(v["bytes_per_token"][d]) for d in dtypes]
        rows.append([name, _fmt(v["kv_heads"]), *sizes, _pct(v["fraction_of_mha"])])
    return _grid(headers, rows)


def _length_lines(plan: dict[str, Any]) -> list[str]:
    s = plan["lengths"]
    if s is None:
        return ["lengths: none given (--lengths-from FILE): paging and sequence counts not computed"]
    origin = s["source"] if s["kind"] == "inline" else f"{s['kind']} {s['source']}"
    line = f"lengths: {s['count']:,} sequences from {origin}"
    if s["count"]:
        line += f"; mean {_fmt(s['mean'])}, p50 {_fmt(s['p50'])}, p99 {_fmt(s['p99'])}, max {_fmt(s['max'])} tokens"
    return [line]


def _paging_lines(plan: dict[str, Any]) -> list[str]:
    paging = plan["paging"]
    if paging is None:
        return []
    headers = ["block size", "blocks", "allocated", "used", "fragmentation", "waste/seq"]
    rows = [
        [
            str(r["block_size"]),
            _fmt(r["blocks"]),
            _fmt(r["allocated_tokens"]),
            _fmt(r["used_tokens"]),
            _pct(r["fragmentation"]),
            _fmt(r["mean_waste_tokens_per_seq"], 1),
        ]
        for r in paging["rows"]
    ]
    rec = paging["recommended"]
    note = (
        f"  least waste: block size {rec['least_waste']}; largest with fragmentation <= "
        f"{100 * rec['limit']:g}%: {_fmt(rec['largest_under_limit'])}"
    )
    return [*_grid(headers, rows), note]


def _prefix_lines(plan: dict[str, Any]) -> list[str]:
    p = plan["prefix_sharing"]
    if p is None:
        return []
    saved = ", ".join(f"{d} {format_bytes(b)}" for d, b in p["saved_bytes"].items())
    return [
        f"prefix sharing ({p['method']}): {_fmt(p['prompt_tokens'])} prompt tokens, "
        f"{_fmt(p['unique_prompt_tokens'])} stored once",
        f"  saves {_pct(p['saved_fraction_of_prompt'])} of prompt tokens, {_pct(p['saved_fraction_of_kv'])} "
        f"of all KV over the whole workload ({saved})",
    ]


def _fit_lines(plan: dict[str, Any]) -> list[str]:
    fit = plan["fit"]
    if fit is None:
        return []
    head = (
        f"fit per GPU: {format_bytes(fit['gpu_memory_bytes'])} x {fit['gpu_util']:g}, tp {fit['tp']}, "
        f"weights {format_bytes(fit['weights_bytes_per_gpu'])}, reserve {format_bytes(fit['reserve_bytes'])}"
        f" -> KV budget {format_bytes(fit['kv_budget_bytes_per_gpu'])}"
    )
    headers = [
        "kv dtype",
        "block",
        "blocks",
        "max tokens",
        "max seqs",
        "seqs @p99",
        "seqs @max",
        "with sharing",
    ]
    rows = [
        [
            r["kv_dtype"],
            str(r["block_size"]),
            _fmt(r["num_blocks"]),
            _fmt(r["max_tokens"]),
            _fmt(r["max_seqs"]),
            _fmt(r["max_seqs_p99"]),
            _fmt(r["max_seqs_longest"]),
            _fmt(r["max_seqs_with_sharing"]),
        ]
        for r in fit["rows"]
    ]
    return [head, *_grid(headers, rows)]


def _warning_lines(plan: dict[str, Any]) -> list[str]:
    return [f"warning: {w}" for w in plan["warnings"]]


def render_html(plan: dict[str, Any]) -> str:
    """A self-contained <section> for report.html: the same text in a <pre> (escaped by the
    report's Jinja2 templates)."""
    from loadkit.htmlparts import macro

    return str(macro("capacity", f"KV-cache capacity: {plan['model']['name']}", render_table(plan),
                     list(plan["assumptions"])))  # fmt: skip
