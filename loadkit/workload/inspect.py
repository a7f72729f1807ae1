"""`loadkit traces inspect FILE`: a trace's rate, inter-arrival CV, length percentiles and prefix sharing.

Reads through the same reader replay uses (tracereader.py; servegen.py for ServeGen), so what
it prints is what a replay of the file would send. The format is recognised from the file
(``--format`` overrides): ``.jsonl`` is Mooncake; a ``chunk-N-trace.csv`` is ServeGen; a CSV
with ``TIMESTAMP,ContextTokens,GeneratedTokens`` is Azure; other CSVs are length tables.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from loadkit.workload.arrival import realised_stats
from loadkit.workload.tracereader import (
    BAD_ROW_POLICIES,
    DEFAULT_COLUMNS,
    TraceReadError,
    in_window,
    read_trace,
)
from loadkit.workload.traces import FORMATS, block_sharing, leading_cached_blocks


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loadkit traces", description="inspect trace files")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "inspect", help="rate, inter-arrival CV, length percentiles and prefix sharing of a trace"
    )
    p.add_argument("file", type=Path)
    p.add_argument("--format", choices=FORMATS, help="the trace format (default: recognised from the file)")
    p.add_argument("--timestamp-column", help="CSV: the timestamp column (lengths format: none by default)")
    p.add_argument("--input-column", help="CSV: the input-token column")
    p.add_argument("--output-column", help="CSV: the output-token column")
    p.add_argument(
        "--on-bad-row",
        choices=BAD_ROW_POLICIES,
        default="refuse",
        help="rows that cannot be replayed as written: refuse (default), skip and count, or "
        "(Mooncake rows with too few hash_ids) pad with blocks of their own; as the scenario's "
        "trace.on_bad_row",
    )
    p.add_argument("--start-s", type=float, help="window start, in the trace's seconds")
    p.add_argument("--end-s", type=float, help="window end, in the trace's seconds")
    p.add_argument("--seed", type=int, default=0, help="ServeGen: the synthesis seed (default 0)")
    p.add_argument(
        "--block-tokens",
        type=_positive,
        default=512,
        help="Mooncake: tokens per hash id (default 512; as the scenario's trace.block_tokens)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def main(argv: list[str]) -> int:
    from loadkit.errors import UserError

    args = _parser().parse_args(argv)
    try:
        result = inspect(args)
    except TraceReadError as exc:
        raise UserError(str(exc)) from None
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() if args.json else render(result))
    return 0


def guess_format(path: Path) -> str:
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return "mooncake"
    if path.name.endswith("-trace.csv"):
        return "servegen"
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            header = [h.strip() for h in next(csv.reader(fh), [])]
    except (OSError, UnicodeDecodeError):
        return "lengths"  # the reader names the problem
    return "azure" if "ContextTokens" in header else "lengths"


def inspect(args: argparse.Namespace) -> dict[str, Any]:
    fmt = args.format or guess_format(args.file)
    out: dict[str, Any] = {"path": str(args.file), "format": fmt}
    if fmt == "servegen":
        from loadkit.workload.servegen import image_tokens_for, notes_for, reason_ratios, synthesise

        t, n_in, n_out = synthesise(args.file, args.seed, args.start_s, args.end_s)
        out["synthesised"] = {
            "seed": args.seed,
            "note": "requests synthesised from the per-window statistics",
        }
        out["notes"] = list(notes_for(args.file))
        out.update(_figures(t, n_in, n_out))
        out["prefix_sharing"] = None
        out["reasoning"] = _reasoning(n_out, reason_ratios(args.file, args.seed, t))
        out["images"] = _images(image_tokens_for(args.file, args.seed, t))
        return out
    t_def, in_def, out_def = DEFAULT_COLUMNS[fmt]
    columns = (args.timestamp_column or t_def, args.input_column or in_def, args.output_column or out_def)
    rows = read_trace(
        args.file,
        fmt,
        None if fmt == "mooncake" else columns,
        on_bad_row=args.on_bad_row,
        block_tokens=args.block_tokens,
    )
    keep = _window(rows.t_s, len(rows), args.start_s, args.end_s)
    out["load"] = rows.load_summary()
    out["notes"] = rows.notes()
    out.update(_figures(None if rows.t_s is None else rows.t_s[keep], rows.n_in[keep], rows.n_out[keep]))
    hashes = None if rows.hash_ids is None else [rows.hash_ids[i] for i in keep]
    out["prefix_sharing"] = None if hashes is None else _sharing(hashes, rows.n_in[keep], args.block_tokens)
    if hashes is not None and rows.hash_ids is not None and len(keep) and keep[0] > 0:
        # A window from the middle: the blocks seen before it are in a production cache already.
        history = {h for ids in rows.hash_ids[: int(keep[0])] for h in ids}
        out["prefix_sharing_with_history"] = _sharing(hashes, rows.n_in[keep], args.block_tokens, history)
    return out


def _window(t: np.ndarray | None, n: int, start: float | None, end: float | None) -> np.ndarray:
    """Row indices in [start, end) seconds from the first row (all rows without a window or clock)."""
    if t is None or (start is None and end is None):
        return np.arange(n)
    return in_window(t - t.min(), start, end)  # as replay's Trace.window, on the same rows


def _figures(t: np.ndarray | None, n_in: np.ndarray, n_out: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": int(len(n_in))}
    if t is not None and len(t):
        stats = realised_stats(t.tolist())
        out["span_s"] = float(t.max() - t.min())
        out["rate_per_s"], out["inter_arrival_cv"] = stats["rate"], stats["cv"]
    else:
        out["span_s"] = out["rate_per_s"] = out["inter_arrival_cv"] = None
    out["input_tokens"] = _percentiles(n_in)
    out["output_tokens"] = _percentiles(n_out)
    return out


def _percentiles(values: np.ndarray) -> dict[str, Any]:
    if len(values) == 0:
        return {k: None for k in ("mean", "p50", "p90", "p99", "max")}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "mean": float(values.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(values.max()),
    }


def _sharing(
    hashes: list[list[int]], n_in: np.ndarray, block_tokens: int, history: set[int] | None = None
) -> dict[str, Any]:
    """Block repeats (any earlier block) and the prefix-cache view (leading blocks seen before)."""
    total, repeats = block_sharing(hashes, history)
    leading = np.minimum(np.asarray(leading_cached_blocks(hashes, history)) * block_tokens, n_in)
    prompt = int(n_in.sum())
    return {
        "blocks": total,
        "blocks_repeating_an_earlier_block": repeats,
        "block_repeat_ratio": repeats / total if total else None,
        "prefix_cached_tokens": int(leading.sum()),
        "prefix_cached_share_of_prompt": float(leading.sum() / prompt) if prompt else None,
    }


def _images(per_request: list[tuple[int, ...]] | None) -> dict[str, Any] | None:
    """A ServeGen multimodal window's images (servegenmm.py): counts per request, tokens per
    image as drawn, and as sent (the size chosen for them, imagetokens.py size_for_tokens)."""
    if per_request is None:
        return None
    from loadkit.imagetokens import FAMILY, image_tokens, size_for_tokens

    counts = np.asarray([len(x) for x in per_request], dtype=np.int64)
    drawn = np.asarray([n for x in per_request for n in x], dtype=np.int64)
    sent = np.asarray([image_tokens(*size_for_tokens(int(n))) for n in drawn], dtype=np.int64)
    values, freq = np.unique(counts, return_counts=True)

    def stats(a: np.ndarray) -> dict[str, float | None]:
        if not len(a):
            return {"mean": None, "p50": None, "p90": None, "max": None}
        return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
                "p90": float(np.percentile(a, 90)), "max": float(a.max())}  # fmt: skip

    return {
        "family": FAMILY,
        "requests_with_images": int((counts > 0).sum()),
        "images": int(counts.sum()),
        "image_count": {str(int(v)): int(f) for v, f in zip(values, freq, strict=True)},
        "image_tokens_per_image": stats(drawn),
        "image_tokens_as_sent": stats(sent),
        "images_off_by_tokens": int((sent != drawn).sum()),
    }


def _reasoning(n_out: np.ndarray, ratio: np.ndarray | None) -> dict[str, Any] | None:
    """The expected reasoning split of a ServeGen reasoning window (reasoning.py), unclipped."""
    if ratio is None:
        return None
    has = ~np.isnan(ratio)
    outs = np.maximum(n_out[has], 1)
    reasoning = np.minimum(outs, np.maximum(0, np.round(outs * ratio[has])))
    return {
        "requests_with_ratio": int(has.sum()),
        "reason_ratio_mean": float(ratio[has].mean()) if has.any() else None,
        "expected_share": float(reasoning.sum() / outs.sum()) if has.any() else None,
    }


def render(r: dict[str, Any]) -> str:
    lines = [
        f"{r['path']}  [{r['format']}{', synthesised' if r.get('synthesised') else ''}]",
        f"  requests {r['requests']:,}" + (f" over {r['span_s']:.1f} s" if r["span_s"] is not None else ""),
    ]
    if r["rate_per_s"] is not None:
        lines.append(f"  rate {r['rate_per_s']:.4g} req/s, inter-arrival CV {_g(r['inter_arrival_cv'])}")
    else:
        lines.append("  no timestamps: rate and CV not measured")
    for name in ("input_tokens", "output_tokens"):
        s = r[name]
        lines.append(
            f"  {name:<14} mean {_g(s['mean'])}  p50 {_g(s['p50'])}  p90 {_g(s['p90'])}  "
            f"p99 {_g(s['p99'])}  max {_g(s['max'])}"
        )
    share = r.get("prefix_sharing")
    if share:
        lines.append(
            f"  prefix sharing: {_pct(share['block_repeat_ratio'])} of blocks repeat an earlier block; "
            f"a prefix cache would hold {_pct(share['prefix_cached_share_of_prompt'])} of prompt tokens"
        )
    else:
        lines.append("  prefix sharing: not in this format")
    hist = r.get("prefix_sharing_with_history")
    if hist:
        lines.append(
            f"  counting the blocks seen before the window: {_pct(hist['block_repeat_ratio'])} repeat; "
            f"a prefix cache would hold {_pct(hist['prefix_cached_share_of_prompt'])} of prompt tokens"
        )
    split = r.get("reasoning")
    if split:
        lines.append(
            f"  reasoning (reason_ratio): expected share {_pct(split['expected_share'])} of output tokens, "
            f"ratio mean {_g(split['reason_ratio_mean'])} over {split['requests_with_ratio']:,} requests"
        )
    im = r.get("images")
    if im:
        counts = ", ".join(f"{k}: {v:,}" for k, v in im["image_count"].items())
        per, sent = im["image_tokens_per_image"], im["image_tokens_as_sent"]
        lines += [
            f"  images: {im['images']:,} in {im['requests_with_images']:,} requests; per request {{{counts}}}",
            f"  image tokens per image mean {_g(per['mean'])}  p50 {_g(per['p50'])}  p90 {_g(per['p90'])}  "
            f"max {_g(per['max'])}; as sent ({im['family']} sizes) mean {_g(sent['mean'])}, "
            f"{im['images_off_by_tokens']:,} images a token or two off",
        ]
    lines += [f"  warning: {n}" for n in r.get("notes") or []]
    return "\n".join(lines)


def _g(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{value:,}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
