"""`loadkit scenarios validate [FILES]` and `loadkit scenarios show FILE [-n N]`.

validate: exit 0 when every file is valid, 2 with one line per invalid file. Without FILES it
checks every scenarios/*.toml of the repository (what CI runs).
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

_REPO_SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loadkit scenarios", description="validate or inspect scenario files")
    sub = parser.add_subparsers(dest="command", required=True)
    val = sub.add_parser("validate", help="check scenario files (default: the repository's scenarios/*.toml)")
    val.add_argument("files", nargs="*", type=Path)
    show = sub.add_parser("show", help="print the first generated requests' lengths")
    show.add_argument("file", type=Path)
    show.add_argument("-n", type=int, default=5, help="how many items (default 5)")
    show.add_argument("--worker", default="0/1", help="worker share INDEX/COUNT (default 0/1)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "validate":
        return validate(args.files)
    return show(args.file, args.n, args.worker)


def validate(files: list[Path]) -> int:
    from loadkit.cli import UserError

    files = files or sorted(_REPO_SCENARIOS.glob("*.toml"))
    if not files:
        raise UserError(f"no scenario files given and none in {_REPO_SCENARIOS}")
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


def show(path: Path, n: int, worker: str) -> int:
    from loadkit.cli import UserError

    try:
        index, count = (int(x) for x in worker.split("/"))
        sc = load_scenario(path)
        t0 = time.perf_counter()
        source = sc.request_source(index, count)
    except ScenarioError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:
        raise UserError(f"--worker: expected INDEX/COUNT with 0 <= INDEX < COUNT, got {worker!r} ({exc})") from None
    arrivals = source.trace_arrival_times_s()
    print(f"{sc.name}: {sc.kind}, tokenizer {source.builder.name}"
          f"{' (approximate)' if source.builder.approximate else ''}")
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
            turns.append(f"{req.n_in_target}->{req.max_tokens}")
            # No server here: a reply of max_tokens pseudo-words stands in for the real one.
            req = item.next_request(" ".join(["reply"] * req.max_tokens), True)
        return f"session {item.session_id}: {item.turns_sent} turns, in->out {' '.join(turns)} ({item.end_reason})"
    return (f"request label={item.label} n_in={item.n_in_target} max_tokens={item.max_tokens} "
            f"cached={item.expected_cached_tokens}")
