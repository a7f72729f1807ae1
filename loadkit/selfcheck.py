"""Client self-check: is this load-generating process itself the bottleneck?

A load generator that runs out of CPU reports its own queueing as the server's latency. Every
process that sends traffic (local run or worker) measures, over a rolling ``window_s``:

- **arrival path**: how many reads held more than one token event. A read knows only its
  newest byte's arrival, so when a socket is left unread past the next token the earlier
  event is stamped late, and that read spoils two or more ITL samples. Over 0.3 % of reads
  coalesced (enough to move the ITL p99), or over 0.3 % of first tokens that came in such a
  read (enough to move the TTFT p99; only one read in hundreds carries a first token) means
  reads fall behind arrivals and token timestamps turn late. Also measured and reported, not
  judged: for every kernel-stamped read, how long its data waited in the socket (read time −
  the kernel's stamp). A wait shorter than the inter-token interval costs nothing (the
  kernel's stamp is the arrival), so the wait alone flagged accurate runs at 20 ms/token;
- **event-loop lag**: a probe greenlet sleeps ``probe_s`` and measures how late it wakes. With
  kernel stamps the token timestamps do not depend on it (reads are stamped by the kernel and
  drained by the hub), but requests are sent late: open-loop schedules slip and closed-loop
  throughput falls short. Without kernel stamps every timestamp carries it;
- **CPU**: the process's CPU time, in percent of one core.

Any of them over its threshold marks the client *saturated*, with the figures that are
therefore suspect: one warning (console, web UI, report — workers' warnings reach the master
in their snapshots) saying from when, another if more figures become suspect later, and a
manifest field ``client_saturation``. At stop a summary warning gives the worst values seen,
since the manifest of a worker stays on the worker.

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
SUSPECT = ["ttft_ms", "ttft_sched_ms", "ttft_with_connect_ms", "itl_ms", "itl_chunk_ms", "tpot_ms", "e2e_ms",
           "connect_ms", "tls_ms", "throughput"]  # fmt: skip
# Late reads distort the token timestamps; late sends the schedule and the offered load, and
# a lagging loop notices connects and handshakes late (their times are user-space stamps).
TIMING_SUSPECT = ["ttft_ms", "ttft_sched_ms", "ttft_with_connect_ms", "itl_ms", "itl_chunk_ms", "tpot_ms", "e2e_ms"]
SEND_SUSPECT = ["ttft_sched_ms", "connect_ms", "tls_ms", "throughput"]
# Fewer reads (first tokens) than this in a window: too few to judge their p99.
MIN_READS = 100
MIN_FIRSTS = 100
# (late reads, coalesced reads, first tokens in coalesced reads), percent of a window; None:
# not judged (too few, or not measured).
ReadPcts = tuple[float | None, float | None, float | None]
# Percent of reads (of first tokens) in reads holding several token events above which the
# ITL (TTFT) p99 moves: such a read spoils two or more ITL samples, and ~10 % of reads carry no
# token. Measured against the simulator's truth: 0.34 % coalesced gave ITL error p99 20 ms at
# 20 ms/token, while 0.07-0.31 % stayed accurate elsewhere: the edge is near 0.3 %.
COALESCED_LIMIT_PCT = 0.3


@dataclass(frozen=True, slots=True)
class SelfCheckConfig:
    """Thresholds and cadence. ``lag_ms``: limit on the event-loop lag p99 when reads are
    stamped in user space, and the socket wait above which a read counts as late (reported);
    ``send_lag_ms``: limit on the event-loop lag p99 when reads carry kernel stamps, where it
    only delays sends (closed loops of equal-length requests restart in bursts: 100 streams ×
    32 tokens, 22 % CPU, showed 5.7 ms); ``cpu_pct``: process CPU in percent of one core."""

    lag_ms: float = 5.0
    send_lag_ms: float = 20.0
    cpu_pct: float = 90.0
    window_s: float = 5.0
    probe_s: float = 0.02
    eval_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("lag_ms", "send_lag_ms", "cpu_pct", "window_s", "probe_s", "eval_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"self-check {name} must be > 0")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _max(seen: float | None, value: float | None) -> float | None:
    """The larger of two measures either of which may be missing (None)."""
    return seen if value is None else value if seen is None else max(seen, value)


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
        # (t_ns, cpu_s, reads, kernel-stamped, late, coalesced, first tokens, first tokens
        # in coalesced reads): cumulative
        self.cpu_marks: deque[tuple[int, float, int, int, int, int, int, int]] = deque()
        self.from_unix: float | None = None
        self.last_unix: float | None = None
        self.max_lag_ms = 0.0
        self.max_cpu_pct = 0.0
        self.max_late_pct: float | None = None
        self.max_coalesced_pct: float | None = None
        self.max_first_coalesced_pct: float | None = None
        self.kernel = False  # the last window's reads carried kernel stamps
        self.saturated_windows = 0
        self.windows = 0
        self.reasons: set[str] = set()
        self.suspect: set[str] = set()

    @property
    def saturated(self) -> bool:
        return self.from_unix is not None

    def add_lag(self, lag_ns: int) -> None:
        self.lags.append((self.mono_ns(), max(0, lag_ns)))

    def evaluate(self, cpu_s: float, reads: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)) -> str | None:
        """Close an evaluation step with the process's CPU time and its cumulative read counts
        (reads, kernel-stamped, later than ``lag_ms``, coalesced; then first tokens, first
        tokens in coalesced reads). Returns a warning the first time the window is over a
        threshold, and again if more figures become suspect."""
        now = self.mono_ns()
        self.cpu_marks.append((now, cpu_s, *reads))
        self._trim(now)
        lag_ms, cpu_pct = self.window_lag_ms(), self.window_cpu_pct()
        if lag_ms is None or cpu_pct is None:
            return None  # not a full window yet: no verdict on a warm-up blip
        kernel = self.kernel = self.window_kernel_stamped()
        pcts = late_pct, coalesced_pct, first_pct = (self.window_late_pct(), self.window_coalesced_pct(),
                                                     self.window_first_coalesced_pct())  # fmt: skip
        self.windows += 1
        self.max_lag_ms, self.max_cpu_pct = max(self.max_lag_ms, lag_ms), max(self.max_cpu_pct, cpu_pct)
        self.max_late_pct = _max(self.max_late_pct, late_pct)
        self.max_coalesced_pct = _max(self.max_coalesced_pct, coalesced_pct)
        self.max_first_coalesced_pct = _max(self.max_first_coalesced_pct, first_pct)
        over = self._over(lag_ms, cpu_pct, pcts, kernel)
        if not over:
            return None
        self.saturated_windows += 1
        self.last_unix = self.wall_ns() / 1e9
        suspect = self._suspect(over, kernel)
        new_reasons, new_suspect = over - self.reasons, suspect - self.suspect
        self.reasons |= over
        self.suspect |= suspect
        if self.from_unix is None:
            self.from_unix = self.last_unix - self.config.window_s
            return self.onset_message(lag_ms, cpu_pct, pcts)
        if new_suspect:
            return self.worse_message(sorted(new_reasons), lag_ms, cpu_pct, pcts)
        return None

    def _over(self, lag_ms: float, cpu_pct: float, pcts: ReadPcts, kernel: bool) -> set[str]:
        late_pct, coalesced_pct, first_pct = pcts
        over = set()
        if lag_ms > (self.config.send_lag_ms if kernel else self.config.lag_ms):
            over.add("event_loop_lag")
        if cpu_pct > self.config.cpu_pct:
            over.add("cpu")
        # late_pct is reported, not judged (module docstring).
        if any(pct is not None and pct > COALESCED_LIMIT_PCT for pct in (coalesced_pct, first_pct)):
            over.add("arrival_lag")
        return over

    @staticmethod
    def _suspect(over: set[str], kernel: bool) -> set[str]:
        if "cpu" in over or ("event_loop_lag" in over and not kernel):
            return set(SUSPECT)  # out of CPU, or reads stamped in user space behind a lagging loop
        suspect: set[str] = set()
        if "arrival_lag" in over:
            suspect |= set(TIMING_SUSPECT)
        if "event_loop_lag" in over:
            suspect |= set(SEND_SUSPECT)
        return suspect

    def suspect_list(self) -> list[str]:
        return [name for name in SUSPECT if name in self.suspect]

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
        (t0, c0, *_), (t1, c1, *_) = self.cpu_marks[0], self.cpu_marks[-1]
        return 100.0 * (c1 - c0) / ((t1 - t0) / 1e9)

    def window_kernel_stamped(self) -> bool:
        """Whether this window's reads carried kernel arrival stamps."""
        return self.cpu_marks[-1][3] > self.cpu_marks[0][3]

    def _window_pct(self, part: int, whole: int, least: int) -> float | None:
        """100 × Δ(mark[part]) / Δ(mark[whole]) over the window (cumulative counters); None
        before a full window or with fewer than ``least`` in the whole."""
        if not self._full_window():
            return None
        first, last = self.cpu_marks[0], self.cpu_marks[-1]
        n = last[whole] - first[whole]
        return None if n < least else 100.0 * (last[part] - first[part]) / n

    def window_first_coalesced_pct(self) -> float | None:
        """Percent of the window's first tokens that came in a read holding several events."""
        return self._window_pct(7, 6, MIN_FIRSTS)

    def window_coalesced_pct(self) -> float | None:
        """Percent of the window's reads that held more than one token event."""
        return self._window_pct(5, 2, MIN_READS)

    def window_late_pct(self) -> float | None:
        """Percent of the window's kernel-stamped reads that waited over ``lag_ms``."""
        return self._window_pct(4, 3, MIN_READS)

    def _full_window(self) -> bool:
        if len(self.cpu_marks) < 2:
            return False
        span = self.cpu_marks[-1][0] - self.cpu_marks[0][0]
        return span >= int(self.config.window_s * 1e9 * 0.9)

    def _figures(self, lag_ms: float, cpu_pct: float, read_pcts: ReadPcts) -> str:
        late_pct, coalesced_pct, first_pct = read_pcts
        lag_limit = self.config.send_lag_ms if self.kernel else self.config.lag_ms
        reads = ("" if late_pct is None else
                 f", reads waiting over {self.config.lag_ms:g} ms {late_pct:.1f}%")  # fmt: skip
        if coalesced_pct is not None:
            reads += f", reads holding several token events {coalesced_pct:.2f}% (limit {COALESCED_LIMIT_PCT:g}%)"
        if first_pct is not None:
            reads += f", first tokens in such reads {first_pct:.2f}% (limit {COALESCED_LIMIT_PCT:g}%)"
        return (f"event-loop lag p99 {lag_ms:.1f} ms (limit {lag_limit:g}), CPU {cpu_pct:.0f}% of a core "
                f"(limit {self.config.cpu_pct:g}%){reads}")  # fmt: skip

    def onset_message(self, lag_ms: float, cpu_pct: float,
                      read_pcts: ReadPcts = (None, None, None)) -> str:  # fmt: skip
        assert self.from_unix is not None
        when = time.strftime("%H:%M:%S", time.gmtime(self.from_unix))
        message = (f"client saturated on {self.node} from {when} UTC (unix {self.from_unix:.0f}): "
                   f"{self._figures(lag_ms, cpu_pct, read_pcts)}; suspect from then on: "
                   f"{', '.join(self.suspect_list())}.")  # fmt: skip
        if self.kernel and not self.suspect & {"ttft_ms", "itl_ms"}:
            message += (" Token timestamps are the kernel's arrival times and reads kept up, so TTFT, ITL, "
                        "TPOT and E2E stand; requests went out late.")  # fmt: skip
        return message + " Add workers (--processes) or lower the load."

    def worse_message(self, reasons: list[str], lag_ms: float, cpu_pct: float,
                      read_pcts: ReadPcts) -> str:  # fmt: skip
        when = time.strftime("%H:%M:%S", time.gmtime(self.last_unix or 0))
        return (f"client saturation on {self.node} worse at {when} UTC ({', '.join(reasons) or 'same limits'}): "
                f"{self._figures(lag_ms, cpu_pct, read_pcts)}; suspect now: {', '.join(self.suspect_list())}.")

    def manifest_field(self) -> dict[str, Any] | None:
        """``client_saturation`` for the report manifest; None while never saturated."""
        if self.from_unix is None:
            return None
        return {"node": self.node, "from_unix": round(self.from_unix, 3), "last_unix": self.last_unix,
                "max_lag_ms": round(self.max_lag_ms, 3), "max_cpu": round(self.max_cpu_pct, 1),
                "max_late_read_pct": _round(self.max_late_pct), "max_coalesced_read_pct": _round(self.max_coalesced_pct),
                "max_first_coalesced_pct": _round(self.max_first_coalesced_pct),
                "reasons": sorted(self.reasons), "saturated_windows": self.saturated_windows,
                "windows": self.windows, "suspect": self.suspect_list()}  # fmt: skip

    def health_field(self) -> dict[str, Any]:
        """``client_selfcheck``: what was measured, saturated or not (None before a full window)."""
        measured = self.windows > 0
        return {"node": self.node, "windows": self.windows,
                "max_lag_ms": round(self.max_lag_ms, 3) if measured else None,
                "max_cpu": round(self.max_cpu_pct, 1) if measured else None,
                "max_late_read_pct": _round(self.max_late_pct), "max_coalesced_read_pct": _round(self.max_coalesced_pct),
                "max_first_coalesced_pct": _round(self.max_first_coalesced_pct),
                "lag_limit_ms": self.config.lag_ms, "send_lag_limit_ms": self.config.send_lag_ms,
                "cpu_limit_pct": self.config.cpu_pct}  # fmt: skip

    def summary_message(self) -> str | None:
        """At stop: the worst values seen, so a master's report has them for every worker."""
        field = self.manifest_field()
        if field is None:
            return None
        return (f"client saturation summary ({self.node}): saturated in {field['saturated_windows']} of "
                f"{field['windows']} windows from unix {field['from_unix']:.0f} to {field['last_unix']:.0f}, "
                f"max event-loop lag p99 {field['max_lag_ms']:.1f} ms, max CPU {field['max_cpu']:.0f}%"
                + ("" if self.max_late_pct is None else
                   f", max reads waiting over {self.config.lag_ms:g} ms {self.max_late_pct:.1f}%")
                + f"; suspect: {', '.join(field['suspect'])}")  # fmt: skip


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
            from loadkit.httpstream import READS

            READS.late_ns = int(self.monitor.config.lag_ms * 1e6)  # what counts as a late read
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
        from loadkit.httpstream import READS

        try:
            message = self.monitor.evaluate(self.cpu_s(), (READS.reads, READS.kernel_stamped, READS.late,
                                                           READS.coalesced, READS.firsts, READS.first_coalesced))  # fmt: skip
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
