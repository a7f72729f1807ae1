"""`loadkit run` and `loadkit demo`: Locust with loadkit's locustfile, optionally against
simulators this command starts and stops itself.

    loadkit run --sim fast=fast --sim big=big -u 16 -t 30s [any locust/loadkit option...]
    loadkit run --sim a=fast,port=8001 ...      # on that port (default: any free one)
    loadkit run --scenario mooncake_replay ...  # no target: the scenario's simulator

Every `--sim NAME[=PROFILE][,port=PORT]` starts `loadkit sim` on a loopback port and adds
`--target NAME=URL`; without a profile, NAME if it is one, else the scenario's `[sim]`
profile, else `default`. With no --sim and no target, one simulator `sim` with the
scenario's profile is started (loadkit/cli/simspec.py). Everything else is passed to
`locust` unchanged; `--headless` is added unless `--ui` is given. The exit code is Locust's;
SIGTERM is passed on to it (a container's stop, docs/kubernetes.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from loadkit.cli.simspec import SimSpec, parse_sim, plan
from loadkit.errors import UserError

LOCUSTFILE = Path(__file__).resolve().parent.parent / "locust" / "locustfile.py"
READY = re.compile(rb"listening on (http://127\.0\.0\.1:\d+)")
DEMO_ARGS = [
    "--sim", "fast=fast", "--sim", "big=big",
    "-u", "96", "-r", "96", "-t", "20s",
    "--stop-timeout", "5",
    "--report-dir", "reports/demo", "--raw-log",
    "--slo", "ttft_ms=500", "--slo", "tpot_ms=50",
]  # fmt: skip


def start_sim(name: str, profile: str, seed: int, port: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    """Start one simulator and wait (bounded) for its ready line."""
    cmd = [
        sys.executable,
        "-m",
        "loadkit.cli",
        "sim",
        "--port",
        str(port),
        "--profile",
        profile,
        "--seed",
        str(seed),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = READY.search(line)
        if match:
            return proc, match.group(1).decode()
    proc.kill()
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    raise UserError(f"simulator {name!r} (profile {profile!r}) did not start: {err or 'no ready line'}")


def split_sims(argv: list[str]) -> tuple[list[SimSpec], list[str], bool]:
    sims: list[SimSpec] = []
    rest: list[str] = []
    ui = False
    it = iter(argv)
    for arg in it:
        if arg == "--ui":
            ui = True
        elif arg == "--sim" or arg.startswith("--sim="):
            value = arg.split("=", 1)[1] if arg.startswith("--sim=") else next(it, "")
            sims.append(parse_sim(value))
        else:
            rest.append(arg)
    return sims, rest, ui


def locust_command(rest: list[str], targets: list[str], ui: bool) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    if not ui and "--headless" not in rest:
        cmd.append("--headless")
    for target in targets:
        cmd += ["--target", target]
    return cmd + rest


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def run(argv: list[str]) -> int:
    sims, rest, ui = split_sims(argv)
    sims, notes = plan(sims, rest)
    for note in notes:
        print(f"loadkit run: {note}", flush=True)
    with ExitStack() as stack:
        targets = []
        for i, spec in enumerate(sims):
            name, profile = spec.name, str(spec.profile)
            proc, url = start_sim(name, profile, seed=1000 + i, port=spec.port)
            stack.callback(stop, proc)
            # The simulator speaks vLLM's flavour of the OpenAI API (extras and /metrics names).
            targets.append(f"{name}={url},engine=vllm")
            print(f"loadkit run: simulator {name} (profile {profile}) at {url}", flush=True)
        locust = subprocess.Popen(locust_command(rest, targets, ui), env=os.environ.copy())
        # SIGTERM (`kubectl delete`, a scaled-down Deployment, `docker stop`) goes to this
        # process only: passed on, Locust stops its users and a worker sends its final snapshot
        # (docs/distributed.md). Without it this process died and left Locust running, and as a
        # container's PID 1, where a signal with no handler is dropped, it ignored SIGTERM until
        # the grace period's SIGKILL took the worker without its final snapshot.
        previous = signal.signal(signal.SIGTERM, lambda *_: locust.send_signal(signal.SIGTERM))
        try:
            return locust.wait()
        except KeyboardInterrupt:
            # Locust handles SIGINT itself (writes reports); wait for it, bounded.
            try:
                return locust.wait(30)
            except subprocess.TimeoutExpired:
                locust.kill()
                return 130
        finally:
            signal.signal(signal.SIGTERM, previous)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        from loadkit.cli.options_cmd import loadkit_actions, render

        print(
            f"usage: loadkit run [--sim NAME[=PROFILE][,port=PORT]]... [--ui] [locust and loadkit options]\n{__doc__}"
        )
        print(render(loadkit_actions()))
        return 0
    return run(argv)


def demo_main(argv: list[str]) -> int:
    """The README's main job: two simulated engines, same uneven chat workload, side by side."""
    return run(DEMO_ARGS + argv)
