"""The `loadkit` command: a thin dispatcher; each subcommand lives beside the code it drives.

Every subcommand module exposes ``main(argv: list[str]) -> int``. Errors a user can fix
(bad file, bad option, unreachable host) end as one line on stderr and exit code 2, never a
traceback.
"""

from __future__ import annotations

import importlib
import sys

from loadkit.errors import run_command

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("loadkit.cli.runcmd", "run a load test (wraps locust with loadkit's locustfile)"),
    "options": ("loadkit.cli.options_cmd", "list every loadkit option: help, default, LOADKIT_* variable"),
    "demo": (
        "loadkit.cli.runcmd:demo_main",
        "the quick-start job: two simulated engines side by side, then a report",
    ),
    "sim": ("loadkit.sim.cli", "serve the embedded engine simulator on loopback"),
    "plugins": ("loadkit.cli.plugins_cmd", "list registered engines and their plugins as JSON"),
    "scenarios": ("loadkit.workload.cli", "validate or inspect scenario files"),
    "traces": (
        "loadkit.workload.inspect",
        "inspect a trace file: rate, CV, length percentiles, prefix sharing",
    ),
    "capacity": ("loadkit.capacity.cli", "KV-cache capacity planning for a model and workload"),
    "report": ("loadkit.report.cli", "rebuild report.html from a report directory"),
    "compare": ("loadkit.report.compare", "compare runs; --fail-if rules gate CI on regressions"),
    "import": (
        "loadkit.report.peers.cli",
        "a peer's result file (GuideLLM, AIPerf) as a loadkit report directory",
    ),
    "verify": (
        "loadkit.verify.cli",
        "recompute report.json from the raw log (--raw-log); exit 1 naming each disagreement",
    ),
}


def _usage() -> str:
    lines = ["usage: loadkit COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from loadkit import __version__

        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"loadkit: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    modname, _, func = SUBCOMMANDS[name][0].partition(":")
    entry = getattr(importlib.import_module(modname), func or "main")
    return run_command(name, entry, rest)
