"""`loadkit capacity`: KV-cache capacity plan for a model on a workload's real lengths."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

import orjson

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.lengths import LengthSample, from_list, read_lengths
from loadkit.capacity.model import list_presets
from loadkit.capacity.planner import DEFAULT_BLOCK_SIZES, DEFAULT_GPU_UTIL, DEFAULT_KV_DTYPES, plan
from loadkit.capacity.render import render_table
from loadkit.errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad option as one UserError line instead of usage + exit."""

    def error(self, message: str) -> NoReturn:
        raise UserError(message)


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="loadkit capacity", description=__doc__)
    p.add_argument("--model", help="Hugging Face config.json (or its folder) or a preset name")
    p.add_argument("--list-presets", action="store_true", help="print the preset names and exit")
    p.add_argument(
        "--kv-dtype", default=",".join(DEFAULT_KV_DTYPES), help="KV cache dtypes: fp16,bf16,fp8,int8,int4"
    )
    p.add_argument("--weight-dtype", help="weight dtype (default: what the config ships, else bf16)")
    p.add_argument(
        "--block-sizes", default=",".join(map(str, DEFAULT_BLOCK_SIZES)), help="tokens per KV block"
    )
    p.add_argument(
        "--gpu-memory", default="80GiB", help="memory per GPU, e.g. 80GiB, 24GiB; 'none' skips the fit"
    )
    p.add_argument(
        "--gpu-util", type=float, default=DEFAULT_GPU_UTIL, help="fraction of GPU memory the engine may use"
    )
    p.add_argument(
        "--tp", type=int, default=1, help="tensor-parallel GPUs (weights and KV heads split across them)"
    )
    p.add_argument(
        "--reserve", default="0GiB", help="per-GPU memory kept for activations/CUDA graphs, e.g. 2GiB"
    )
    p.add_argument(
        "--lengths-from",
        metavar="FILE",
        help="a run's raw log / report dir, Azure or ShareGPT CSV, Mooncake JSONL, or scenario TOML",
    )
    p.add_argument("--lengths", help="inline sequence lengths, e.g. 12,105,43")
    p.add_argument(
        "--on-bad-row",
        choices=("refuse", "skip", "pad"),
        default="refuse",
        help="a trace row that cannot be used: refuse the file (default, names the line), skip and count it, "
        "or pad (Mooncake rows with too few hash_ids: kept at their input_length, as replay pads them)",
    )
    p.add_argument(
        "--max-requests", type=int, default=10_000, help="requests drawn from a scenario (default 10000)"
    )
    p.add_argument(
        "--max-fragmentation", type=float, default=0.05, help="limit for the block-size recommendation"
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON (schema loadkit.capacity/1)")
    return p


def _int_list(text: str, option: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option}: expected comma-separated integers, got {text!r}") from None


def _lengths(args: argparse.Namespace) -> LengthSample | None:
    if args.lengths_from and args.lengths:
        raise UserError("give --lengths-from or --lengths, not both")
    if args.lengths:
        return from_list(_int_list(args.lengths, "--lengths"), "--lengths")
    return read_lengths(args.lengths_from, args.max_requests, args.on_bad_row) if args.lengths_from else None


def main(argv: list[str]) -> int:
    args = _build_parser().parse_args(argv)
    if args.list_presets:
        print("\n".join(list_presets()))
        return 0
    if not args.model:
        raise UserError("--model CONFIG.json|PRESET is required (presets: " + ", ".join(list_presets()) + ")")
    try:
        result = plan(
            args.model,
            _lengths(args),
            kv_dtypes=[d for d in args.kv_dtype.split(",") if d.strip()],
            block_sizes=_int_list(args.block_sizes, "--block-sizes"),
            gpu_memory=None if args.gpu_memory.lower() == "none" else args.gpu_memory,
            gpu_util=args.gpu_util,
            tp=args.tp,
            weight_dtype=args.weight_dtype,
            reserve=args.reserve,
            max_fragmentation=args.max_fragmentation,
        )
    except CapacityError as exc:
        raise UserError(str(exc)) from None
    _emit(result, args.json)
    return 0


def _emit(result: dict[str, object], as_json: bool) -> None:
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        sys.stdout.write(render_table(result))
