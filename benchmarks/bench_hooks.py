"""Micro-benchmark: the per-request cost of calling ``loadkit_request_finished``.

"loop" is how loadkit called it before hooks went through pluggy (iterate the implementations,
call each function in a try); "pm.hook" is today's call site (one pluggy call, then the
contained-failure check; each implementation behind the guard installed at registration).
Measured with 0, 1 and 3 installed implementations that do nothing, so the figures are the
dispatch alone.

    python benchmarks/bench_hooks.py --calls 1000000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from loadkit import hookimpl
from loadkit.plugins import new_plugin_manager


class Noop:
    @hookimpl
    def loadkit_request_finished(self, record):
        pass


def manager(n: int):
    pm = new_plugin_manager(load_entry_points=False)
    for i in range(n):
        pm.register(Noop(), name=f"noop-{i}")
    return pm


def loop_call(pm) -> Callable[[object], None]:
    """The old call site, calling each plugin's own function (not the guard around it)."""
    original = {
        id(impl): impl.function.__wrapped__ for impl in pm.hook.loadkit_request_finished.get_hookimpls()
    }

    def call(rec: object) -> None:
        for impl in pm.hook.loadkit_request_finished.get_hookimpls():
            try:
                original[id(impl)](record=rec)
            except Exception:
                pass

    return call


def hook_call(pm) -> Callable[[object], None]:
    hook = pm.hook

    def call(rec: object) -> None:  # as Runtime.record and Runtime._notify_finished do
        if "loadkit_request_finished" in pm.implemented:
            hook.loadkit_request_finished(record=rec)
            if pm.failures:
                pm.take_failures("loadkit_request_finished")

    return call


def ns_per_call(call: Callable[[object], None], calls: int) -> float:
    rec = object()
    best = float("inf")
    for _ in range(3):  # best of three: the machine is shared
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            call(rec)
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    calls = parser.parse_args().calls
    print(f"{'impls':>5} {'loop ns/call':>13} {'pm.hook ns/call':>16}")
    for n in (0, 1, 3):
        pm = manager(n)
        print(f"{n:>5} {ns_per_call(loop_call(pm), calls):>13.0f} {ns_per_call(hook_call(pm), calls):>16.0f}")


if __name__ == "__main__":
    main()
