"""Client self-check: is this load-generating process itself the bottleneck?

A load generator that runs out of CPU reports its own queueing as the server's latency. Every
process that sends traffic (local run or worker) runs one probe greenlet: it sleeps
``probe_s`` and measures how late it wakes (event-loop lag), and every ``eval_s`` it reads the
process's CPU time. Over a rolling ``window_s``, lag p99 above ``lag_ms`` or CPU above
``cpu_pct`` of one core marks the client *saturated*: one warning (console, web UI, report —
workers' warnings reach the master in their snapshots) saying from when and which figures are
suspect, and a manifest field ``client_saturation``. At stop a summary warning gives the
worst values seen, since the manifest of a worker stays on the worker.

The arithmetic (:class:`SaturationMonitor`) is plain Python with injected clocks; only
:class:`SelfCheck` touches gevent and Locust.
"""

from __future__ import annotations

import logging
import resource
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("loadkit.selfcheck")

# Figures a saturated client distorts: every latency includes its queueing, ITL and TTFT
# absorb reads that coalesced while it was busy, open-loop sends go out late, and the
# offered load may fall short of the scenario's.
SUSPECT = ["ttft_ms", "ttft_sched_ms", "itl_ms", "itl_chunk_ms", "tpot_ms", "e2e_ms", "throughput"]


@dataclass(frozen=True, slots=True)
class SelfCheckConfig:
    """Thresholds and cadence. ``lag_ms``: event-loop lag p99 over the window; ``cpu_pct``:
    process CPU in percent of one core over the window."""

    lag_ms: float = 5.0
    cpu_pct: float = 90.0
    window_s: float = 5.0
    probe_s: float = 0.02
    eval_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("lag_ms", "cpu_pct", "window_s", "probe_s", "eval_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"self-check {name} must be > 0")


def process_cpu_s() -> float:
    """User + system CPU seconds of this process (all threads)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def p99(values: list[int]) -> int:
    """Nearest-rank 99th percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]


class SaturationMonitor:
    """Rolling-window verdict from lag samples and CPU readings; see the module docstring.

    ``mono_ns`` stamps samples (monotonic ns); ``wall_ns`` only labels when saturation began.
    """

    def __init__(self, config: SelfCheckConfig | None = None, *, mono_ns: Callable[[], int] = time.perf_counter_ns,
                 wall_ns: Callable[[], int] = time.time_ns, node: str = "local") -> None:  # fmt: skip
        self.config = config or SelfCheckConfig()
        self.mono_ns, self.wall_ns, self.node = mono_ns, wall_ns, node
        self.reset()

    def reset(self) -> None:
        self.lags: deque[tuple[int, int]] = deque()  # (t_ns, lag_ns)
        self.cpu_marks: deque[tuple[int, float]] = deque()  # (t_ns, cpu_s)
        self.from_unix: float | None = None
        self.last_unix: float | None = None
        self.max_lag_ms = 0.0
        self.max_cpu_pct = 0.0
        self.saturated_windows = 0
        self.windows = 0
        self.reasons: set[str] = set()

    @property
    def saturated(self) -> bool:
        return self.from_unix is not None

    def add_lag(self, lag_ns: int) -> None:
        self.lags.append((self.mono_ns(), max(0, lag_ns)))

    def evaluate(self, cpu_s: float) -> str | None:
        """Close an evaluation step with the process CPU reading; returns the onset warning
        the first time the window is over a threshold, else None."""
        now = self.mono_ns()
        self.cpu_marks.append((now, cpu_s))
        self._trim(now)
        lag_ms, cpu_pct = self.window_lag_ms(), self.window_cpu_pct()
        if lag_ms is None or cpu_pct is None:
            return None  # not a full window yet: no verdict on a warm-up blip
        self.windows += 1
        self.max_lag_ms, self.max_cpu_pct = max(self.max_lag_ms, lag_ms), max(self.max_cpu_pct, cpu_pct)
        over = self._over(lag_ms, cpu_pct)
        if not over:
            return None
        self.saturated_windows += 1
        self.reasons |= over
        self.last_unix = self.wall_ns() / 1e9
        if self.from_unix is not None:
            return None
        self.from_unix = self.last_unix - self.config.window_s
        return self.onset_message(lag_ms, cpu_pct)

    def _over(self, lag_ms: float, cpu_pct: float) -> set[str]:
        over = set()
        if lag_ms > self.config.lag_ms:
            over.add("event_loop_lag")
        if cpu_pct > self.config.cpu_pct:
            over.add("cpu")
        return over

    def _trim(self, now: int) -> None:
        horizon = now - int(self.config.window_s * 1e9)
        while self.lags and self.lags[0][0] < horizon:
            self.lags.popleft()
        # Keep one CPU mark at or before the horizon so the window's CPU spans all of it.
        while len(self.cpu_marks) > 1 and self.cpu_marks[1][0] <= horizon:
            self.cpu_marks.popleft()

    def window_lag_ms(self) -> float | None:
        if not self.lags or not self._full_window():
            return None
        return p99([lag for _, lag in self.lags]) / 1e6

    def window_cpu_pct(self) -> float | None:
        if not self._full_window():
            return None
        (t0, c0), (t1, c1) = self.cpu_marks[0], self.cpu_marks[-1]
        return 100.0 * (c1 - c0) / ((t1 - t0) / 1e9)

    def _full_window(self) -> bool:
        if len(self.cpu_marks) < 2:
            return False
        span = self.cpu_marks[-1][0] - self.cpu_marks[0][0]
        return span >= int(self.config.window_s * 1e9 * 0.9)

    def onset_message(self, lag_ms: float, cpu_pct: float) -> str:
        assert self.from_unix is not None
        when = time.strftime("%H:%M:%S", time.gmtime(self.from_unix))
        return (f"client saturated on {self.node} from {when} UTC (unix {self.from_unix:.0f}): event-loop lag p99 "
                f"{lag_ms:.1f} ms (limit {self.config.lag_ms:g}), CPU {cpu_pct:.0f}% of a core (limit "
                f"{self.config.cpu_pct:g}%); suspect from then on: {', '.join(SUSPECT)}. Add workers (--processes) "
                "or lower the load.")  # fmt: skip

    def manifest_field(self) -> dict[str, Any] | None:
        """``client_saturation`` for the report manifest; None while never saturated."""
        if self.from_unix is None:
            return None
        return {"node": self.node, "from_unix": round(self.from_unix, 3), "last_unix": self.last_unix,
                "max_lag_ms": round(self.max_lag_ms, 3), "max_cpu": round(self.max_cpu_pct, 1),
                "reasons": sorted(self.reasons), "saturated_windows": self.saturated_windows,
                "windows": self.windows, "suspect": list(SUSPECT)}  # fmt: skip

    def health_field(self) -> dict[str, Any]:
        """``client_selfcheck``: what was measured, saturated or not (None before a full window)."""
        measured = self.windows > 0
        return {"node": self.node, "windows": self.windows,
                "max_lag_ms": round(self.max_lag_ms, 3) if measured else None,
                "max_cpu": round(self.max_cpu_pct, 1) if measured else None,
                "lag_limit_ms": self.config.lag_ms, "cpu_limit_pct": self.config.cpu_pct}  # fmt: skip

    def summary_message(self) -> str | None:
        """At stop: the worst values seen, so a master's report has them for every worker."""
        field = self.manifest_field()
        if field is None:
            return None
        return (f"client saturation summary ({self.node}): saturated in {field['saturated_windows']} of "
                f"{field['windows']} windows from unix {field['from_unix']:.0f} to {field['last_unix']:.0f}, "
                f"max event-loop lag p99 {field['max_lag_ms']:.1f} ms, max CPU {field['max_cpu']:.0f}%")  # fmt: skip


class SelfCheck:
    """The probe greenlet of one process, reporting into a stats collector (``warn``,
    ``set_manifest_fields``). ``start()`` at test start, ``stop()`` at test stop."""

    def __init__(self, stats: Any, config: SelfCheckConfig | None = None, node: str = "local",
                 cpu_s: Callable[[], float] = process_cpu_s) -> None:  # fmt: skip
        self.stats = stats
        self.monitor = SaturationMonitor(config, node=node)
        self.cpu_s = cpu_s
        self._greenlet: Any = None

    def start(self) -> None:
        import gevent

        if self._greenlet is None:
            self.monitor.reset()
            self._publish()
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        summary = self.monitor.summary_message()
        if summary is not None:
            self.stats.warn(summary)
        self._publish()

    def _run(self) -> None:
        import gevent

        cfg, mon = self.monitor.config, self.monitor
        probe_ns, eval_ns = int(cfg.probe_s * 1e9), int(cfg.eval_s * 1e9)
        next_eval = mon.mono_ns() + eval_ns
        while True:
            t0 = mon.mono_ns()
            gevent.sleep(cfg.probe_s)
            now = mon.mono_ns()
            mon.add_lag(now - t0 - probe_ns)
            if now >= next_eval:
                next_eval = now + eval_ns
                self._evaluate()

    def _evaluate(self) -> None:
        try:
            message = self.monitor.evaluate(self.cpu_s())
            if message is not None:
                self.stats.warn(message)
            self._publish()
        except Exception as exc:  # the probe must not die silently, nor kill the run
            log.exception("loadkit self-check failed")
            self.stats.warn(f"client self-check failed ({exc!r}): saturation is not being watched")

    def _publish(self) -> None:
        health = {**self.monitor.health_field(), **read_stats()}
        self.stats.set_manifest_fields({"client_saturation": self.monitor.manifest_field(),
                                        "client_selfcheck": health})  # fmt: skip


def read_stats() -> dict[str, Any]:
    """How this process's stream reads went: how many were stamped by the kernel, and how
    many held more than one token event (those events share the newest one's arrival time,
    so their ITL and TTFT may be late by up to one inter-token interval)."""
    from loadkit.httpstream import READS

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


def node_name(environment: Any) -> str:
    runner = getattr(environment, "runner", None)
    index = getattr(runner, "worker_index", None)
    kind = type(runner).__name__ if runner is not None else ""
    return f"worker {index}" if "Worker" in kind and index is not None else "local"


def install(environment: Any, config: SelfCheckConfig | None = None) -> None:
    """Wire the self-check into a Locust environment: call once at ``init``. It starts at
    every test start on nodes that send traffic (local, worker), never on a master, and
    reports into ``environment.loadkit.stats``."""
    holder: dict[str, SelfCheck] = {}

    def on_test_start(**_kw: Any) -> None:
        if "Master" in type(environment.runner).__name__:
            return
        stats = getattr(getattr(environment, "loadkit", None), "stats", None) or LogOnlyStats()
        check = holder.get("check")
        if check is None or (check.stats is not stats and not isinstance(stats, LogOnlyStats)):
            check = holder["check"] = SelfCheck(stats, config, node_name(environment))
        check.start()

    def on_test_stop(**_kw: Any) -> None:
        check = holder.get("check")
        if check is not None:
            check.stop()

    environment.events.test_start.add_listener(on_test_start)
    environment.events.test_stop.add_listener(on_test_stop)
