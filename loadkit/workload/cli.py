"""`loadkit scenarios list`, `validate [SCENARIOS]`, `show SCENARIO [-n N]`, `path NAME`.

A SCENARIO is a file path or the name of a shipped scenario (``uneven_chat``).
list: one line per shipped scenario. validate: exit 0 when every scenario is valid, 2 with one
line per invalid one; without arguments it checks every shipped scenario (what CI runs).
path: the shipped file's location, to copy and edit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from loadkit.types import GenerationRequest
from loadkit.workload.errors import ScenarioError
from loadkit.workload.scenario import load_scenario
from loadkit.workload.sessions import Session, TraceSession
from loadkit.workload.shipped import SHIPPED_DIR, describe_shipped, find_scenario, shipped_scenarios


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadkit scenarios", description="validate or inspect scenario files"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the shipped scenarios, one line each (use a name as --scenario NAME)")
    val = sub.add_parser(
        "validate", help="check scenario files or shipped names (default: every shipped scenario)"
    )
    val.add_argument("files", nargs="*", metavar="SCENARIO")
    show = sub.add_parser("show", help="print the first generated requests' lengths")
    show.add_argument("file", metavar="SCENARIO")
    where = sub.add_parser("path", help="print where a shipped scenario's file is (to copy and edit)")
    where.add_argument("name")
    show.add_argument("-n", type=int, default=5, help="how many items (default 5)")
    show.add_argument("--worker", default="0/1", help="worker share INDEX/COUNT (default 0/1)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        return list_shipped()
    if args.command == "path":
        return print_path(args.name)
    if args.command == "validate":
        return validate(args.files)
    return show(args.file, args.n, args.worker)


def list_shipped() -> int:
    rows = describe_shipped()
    width = max((len(name) for name, _, _ in rows), default=0)
    for name, kind, description in rows:
        print(f"{name:<{width}}  {description} [{kind}]")
    return 0


def print_path(name: str) -> int:
    from loadkit.errors import UserError

    try:
        path = find_scenario(name)
    except ScenarioError as exc:
        raise UserError(str(exc)) from None
    print(path.resolve())
    return 0


def validate(files: list[str | Path]) -> int:
    from loadkit.errors import UserError

    files = files or list(shipped_scenarios().values())
    if not files:
        raise UserError(f"no scenario files given and none shipped in {SHIPPED_DIR}")
    bad = 0
    for path in files:
        try:
            sc = load_scenario(path)
        except ScenarioError as exc:
            print(f"invalid: {exc}", file=sys.stderr)
            bad += 1
        else:
            print(f"ok: {path}: {sc.name} ({sc.kind}, seed {sc.seed}, arrival {sc.arrival['model']})")
    return 2 if bad else 0


def show(path: str | Path, n: int, worker: str) -> int:
    from loadkit.errors import UserError

    try:
        index, count = (int(x) for x in worker.split("/"))
        sc = load_scenario(path)
        t0 = time.perf_counter()
        source = sc.request_source(index, count)
    except ScenarioError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:
        raise UserError(
            f"--worker: expected INDEX/COUNT with 0 <= INDEX < COUNT, got {worker!r} ({exc})"
        ) from None
    arrivals = source.trace_arrival_times_s()
    print(
        f"{sc.name}: {sc.kind}, tokenizer {source.builder.name}"
        f"{' (approximate)' if source.builder.approximate else ''}"
    )
    for i in range(max(n, 0)):
        item = source.next_item()
        if item is None:
            print("(workload exhausted)")
            break
        at = f" t={arrivals[i]:.3f}s" if arrivals is not None and i < len(arrivals) else ""
        print(_describe(item) + at)
    print(f"({(time.perf_counter() - t0) * 1000:.1f} ms including load)")
    return 0


def _describe(item: GenerationRequest | Session | TraceSession) -> str:
    if isinstance(item, Session | TraceSession):
        turns = []
        req = item.next_request(None, True)
        while req is not None:
            turns.append(
                f"{req.n_in_target}->{req.max_tokens}" + ("" if req.kind == "chat" else f" [{req.kind}]")
            )
            # No server here: a reply of max_tokens pseudo-words stands in for the real one.
            req = item.next_request(" ".join(["reply"] * req.max_tokens), True)
        return f"session {item.session_id}: {item.turns_sent} turns, in->out {' '.join(turns)} ({item.end_reason})"
    images = (
        f" images={item.image_count} pixels={item.image_pixels} image_tokens~{item.image_tokens_expected}"
        if item.image_count
        else ""
    )
    if item.kind != "chat":  # embeddings, rerank, a plugin's: its items, not an output length
        top = f" top_n={item.top_n}" if item.top_n is not None else ""
        return (
            f"request kind={item.kind} label={item.label} n_in={item.n_in_target} items={item.n_items}{top}"
        )
    return (
        f"request label={item.label} n_in={item.n_in_target} max_tokens={item.max_tokens} "
        f"cached={item.expected_cached_tokens}{images}"
    )
