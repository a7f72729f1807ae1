"""The self-check's probe: a greenlet in each load-generating process that measures the
event loop's lag, samples the process's counters once per step, and reports the verdicts
of ``SaturationMonitor`` into the stats collector (``warn``, ``set_manifest_fields``).

No gevent and no Locust here: the caller hands the probe its event loop's ``spawn`` and
``sleep`` (gevent's, from ``loadkit/locust/selfcheck.py``, which also wires it into a Locust
environment with the run's stats collector)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from loadkit.selfcheck import sources
from loadkit.selfcheck.monitor import SaturationMonitor
from loadkit.selfcheck.verdict import SelfCheckConfig, Verdict
from loadkit.selfcheck.window import Window

log = logging.getLogger("loadkit.selfcheck")
# A file to append every judged window to, as one JSON line (calibration, debugging).
TRACE_ENV = "LOADKIT_SELFCHECK_TRACE"


def kernel_stamps_expected() -> bool:
    """Whether this process's reads will ask the kernel for arrival stamps (Linux, not off)."""
    from loadkit.client.stamps import kernel_timestamps_wanted

    return sys.platform.startswith("linux") and kernel_timestamps_wanted()


class SelfCheck:
    """The probe greenlet of one process, reporting into a stats collector (``warn``,
    ``set_manifest_fields``). ``start()`` at test start, ``stop()`` at test stop. ``spawn``
    runs the probe loop as a greenlet (its result must have ``kill(block=False)``) and
    ``sleep`` yields to the loop for so many seconds: both are needed by ``start()`` only. The
    counters' readers default to ``sources`` (injectable for tests)."""

    def __init__(self, stats: Any, config: SelfCheckConfig | None = None, node: str = "local",
                 cpu_s: Callable[[], float] = sources.process_cpu_s, kernel_stamps: bool | None = None,
                 wait_s: Callable[[], float | None] = sources.run_queue_wait_s,
                 pressure_s: Callable[[], float | None] = sources.cpu_pressure_s,
                 spawn: Callable[[Callable[[], None]], Any] | None = None,
                 sleep: Callable[[float], Any] | None = None) -> None:  # fmt: skip
        self.stats = stats
        self.spawn, self.sleep = spawn, sleep
        expected = kernel_stamps_expected() if kernel_stamps is None else kernel_stamps
        self.monitor = SaturationMonitor(config, node=node, kernel_stamps=expected, on_window=self._trace)
        self.cpu_s, self.wait_s, self.pressure_s = cpu_s, wait_s, pressure_s
        self._greenlet: Any = None
        self._noted = False
        self._trace_path = os.environ.get(TRACE_ENV) or None

    def start(self) -> None:
        if self.spawn is None or self.sleep is None:
            raise RuntimeError(
                "SelfCheck.start needs the event loop's spawn and sleep (loadkit.locust.selfcheck)"
            )
        if self._greenlet is None:
            from loadkit.client.stamps import READS

            READS.late_ns = int(self.monitor.config.late_ms * 1e6)  # what counts as a late read
            self.monitor.reset()
            self._noted = False
            self._publish()
            self._greenlet = self.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        summary = self.monitor.summary_message()
        if summary is not None:
            self.stats.warn(summary)
        self._publish()

    def _run(self) -> None:
        sleep = self.sleep
        assert sleep is not None  # start() checked
        cfg, mon = self.monitor.config, self.monitor
        probe_ns, eval_ns = int(cfg.probe_s * 1e9), int(cfg.eval_s * 1e9)
        next_eval = mon.mono_ns() + eval_ns
        while True:
            t0 = mon.mono_ns()
            sleep(cfg.probe_s)
            now = mon.mono_ns()
            mon.add_lag(now - t0 - probe_ns)
            if now >= next_eval:
                next_eval = now + eval_ns
                self._evaluate()

    def _evaluate(self) -> None:
        from loadkit.client.stamps import READS

        try:
            message = self.monitor.evaluate(self.cpu_s(), READS.counts(), wait_s=self.wait_s(), pressure_s=self.pressure_s(),
                                            full_gcs=sources.full_collections())  # fmt: skip
            if message is not None:
                self.stats.warn(message)
            if self.monitor.note is not None and not self._noted:
                self._noted = True
                log.info(self.monitor.note)  # the server's output, not a client problem: not a warning
            self._publish()
        except Exception as exc:  # the probe must not die silently, nor kill the run
            log.exception("loadkit self-check failed")
            self.stats.warn(f"client self-check failed ({exc!r}): saturation is not being watched")

    def _trace(self, window: Window, verdict: Verdict) -> None:
        if self._trace_path is None:
            return
        import dataclasses
        import json

        # t_mono_ns: the window's end, on the clock of the raw log's and the truth log's stamps
        # (scoring a window against the truth needs it).
        last = self.monitor.last
        row = {**dataclasses.asdict(window), "t_mono_ns": last.t_ns if last else None, "node": self.monitor.node,
               "kernel": self.monitor.kernel, "reasons": sorted(verdict.reasons), "cause": verdict.cause,
               "server": verdict.server, "saturated": verdict.saturated}  # fmt: skip
        with open(self._trace_path, "a") as fh:
            fh.write(json.dumps(row) + "\n")

    def _publish(self) -> None:
        health = {**self.monitor.health_field(), **read_stats(), "server_note": self.monitor.note}
        self.stats.set_manifest_fields({"client_saturation": self.monitor.manifest_field(),
                                        "client_selfcheck": health})  # fmt: skip


def read_stats() -> dict[str, Any]:
    """How this process's stream reads went: how many were stamped by the kernel, and how
    many held more than one token event (those events share the newest one's arrival time,
    so their ITL and TTFT may be late by up to one inter-token interval)."""
    from loadkit.client.stamps import READS

    reads = READS.reads
    return {"reads": reads,
            "kernel_stamped_pct": round(100 * READS.kernel_stamped / reads, 2) if reads else None,
            "coalesced_read_pct": round(100 * READS.coalesced / reads, 3) if reads else None}  # fmt: skip


class LogOnlyStats:
    """Stand-in when the process has no stats collector: warnings still reach the console."""

    def warn(self, message: str) -> None:
        log.warning(message)

    def set_manifest_fields(self, fields: dict[str, Any]) -> None:
        pass
