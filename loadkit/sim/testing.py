"""Helpers to run the simulator from tests and from other tools.

    with sim_process("--profile", "fast") as sim:          # a real subprocess
        http.client.HTTPConnection(sim.host, sim.port) ...
        sim.truth_records()                                  # parsed truth log

    with sim_thread(profile="fast") as sim:                 # same server, in a thread (fast)
        ...

``sim_process`` runs ``python -m loadkit.sim --port 0`` (or the ``--serve`` specs you pass),
waits for the ready lines, and terminates the process on exit (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

_READY = re.compile(r"loadkit sim: listening on (https?://(\S+):(\d+))")


@dataclass
class SimHandle:
    """A running simulator: its URLs, its truth log, and (for threads) its engines."""

    urls: list[str]
    truth_log: str | None
    process: subprocess.Popen[str] | None = None
    engines: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def host(self) -> str:
        return self.url.split("//", 1)[1].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def ports(self) -> list[int]:
        return [int(u.rsplit(":", 1)[1]) for u in self.urls]

    def truth_records(self) -> list[dict[str, Any]]:
        """Truth log lines written so far (the simulator flushes every 0.5 s and at exit)."""
        if not self.truth_log or not os.path.exists(self.truth_log):
            return []
        with open(self.truth_log, "rb") as fh:
            return [orjson.loads(line) for line in fh if line.strip()]

    def wait_truth(self, n: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """Poll the truth log until it holds at least n records (or the timeout passes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            records = self.truth_records()
            if len(records) >= n or time.monotonic() > deadline:
                return records
            time.sleep(0.05)

    def wait_truth_for(self, request_ids: set[str], timeout_s: float = 5.0) -> dict[str, dict[str, Any]]:
        """The truth records by request id, once each of ``request_ids`` has its line (or the
        timeout passes). A count is not enough: the log also holds requests cancelled at stop,
        so the last measured request's line can still be on its way when the count is reached."""
        deadline = time.monotonic() + timeout_s
        while True:
            truth = {r["request_id"]: r for r in self.truth_records()}
            if request_ids <= truth.keys() or time.monotonic() > deadline:
                return truth
            time.sleep(0.05)


@contextmanager
def sim_process(
    *args: str, truth_log: str | bool = True, ready_timeout_s: float = 15.0, cpu: int | None = None
) -> Iterator[SimHandle]:
    """Start ``python -m loadkit.sim`` with ``args`` on a free port; yield a SimHandle.

    ``truth_log=True`` writes a truth log to a temporary file (``handle.truth_log``); a string
    names the file; False disables it. ``cpu`` pins the process to one core (taskset).
    """
    argv = list(args)
    if "--serve" not in argv and "--port" not in argv:
        argv += ["--port", "0"]
    tmpdir = None
    if truth_log is True:
        tmpdir = tempfile.mkdtemp(prefix="loadkit-sim-")
        truth_log = os.path.join(tmpdir, "truth.jsonl")
    if truth_log:
        argv += ["--truth-log", str(truth_log)]
    cmd = [sys.executable, "-m", "loadkit.sim", *argv]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        urls = _wait_ready(proc, argv.count("--serve") or 1, ready_timeout_s)
        yield SimHandle(urls, str(truth_log) if truth_log else None, proc)
    finally:
        _stop(proc)
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)  # the temporary truth log: read it inside the block


def _wait_ready(proc: subprocess.Popen[str], n: int, timeout_s: float) -> list[str]:
    assert proc.stdout is not None
    urls: list[str] = []
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        while len(urls) < n:
            line = proc.stdout.readline()
            if not line:
                err = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"loadkit sim exited before it was ready: {err.strip()[-500:]}")
            m = _READY.search(line)
            if m:
                urls.append(m.group(1))
    finally:
        timer.cancel()
    return urls


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


@contextmanager
def sim_thread(
    family: str = "openai",
    profile: str = "fast",
    truth_log: str | None = None,
    faults: list[str] | None = None,
    seed: int = 0,
    stall_seconds: float = 60.0,
    trickle_interval_ms: float = 5.0,
    sndbuf: int | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_client_ca: str | None = None,
    **overrides: Any,
) -> Iterator[SimHandle]:
    """Run one simulated engine on a free port in a background thread (no subprocess).

    ``overrides`` are profile fields (e.g. ``decode_base_ms=1``). The thread's event loop is
    plain asyncio; timing is less precise than the subprocess (the GIL is shared with the test).
    """
    from loadkit.sim.cli import serve
    from loadkit.sim.config import get_profile
    from loadkit.sim.faults import build_plan
    from loadkit.sim.server import EngineSpec, ServerOptions

    prof = get_profile(profile).replace(**overrides) if overrides else get_profile(profile)
    options = ServerOptions(
        seed=seed,
        faults=build_plan(faults or []),
        truth_log=truth_log,
        spin_us=0,
        stall_seconds=stall_seconds,
        trickle_interval_ms=trickle_interval_ms,
        sndbuf=sndbuf,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
    )
    spec = EngineSpec(family, 0, prof)
    ready = threading.Event()
    state: dict[str, Any] = {}

    def run() -> None:
        async def main() -> None:
            state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
            state["task"] = asyncio.create_task(serve([spec], options, state["stop"], state))
            while "engines" not in state:
                await asyncio.sleep(0.005)
            ready.set()
            await state["task"]

        asyncio.run(main())

    thread = threading.Thread(target=run, name="loadkit-sim", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("in-thread simulator did not start")
    engines = state["engines"]
    try:
        yield SimHandle([f"{options.scheme}://127.0.0.1:{e.port}" for e in engines], truth_log, None, engines)
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(timeout=5)
