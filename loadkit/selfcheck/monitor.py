"""The rolling-window arithmetic of the self-check: plain Python with injected clocks (only
``probe.SelfCheck`` touches gevent and the kernel's counters)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from loadkit.client.stamps import ReadCounts
from loadkit.selfcheck import messages
from loadkit.selfcheck.verdict import CAUSES, SUSPECT, SelfCheckConfig, Verdict, judge
from loadkit.selfcheck.window import MIN_READS, Sample, Window, measure

# Measures kept at their worst over the run (health) and over saturated windows (summary).
HEALTH = ("lag_p99_ms", "cpu_pct", "late_pct", "coalesced_pct", "first_coalesced_pct", "wait_pct", "pressure_pct",
          "lag_max_ms", "coalesced_event_pct", "late_coalesced_event_pct", "first_late_coalesced_pct",
          "client_coalesced_event_pct", "first_client_coalesced_pct")  # fmt: skip


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _max(seen: float | None, value: float | None) -> float | None:
    """The larger of two measures either of which may be missing (None)."""
    return seen if value is None else value if seen is None else max(seen, value)


class SaturationMonitor:
    """Rolling-window verdicts from lag samples and cumulative counters.

    ``mono_ns`` stamps samples (monotonic ns); ``wall_ns`` only labels when saturation began.
    ``kernel_stamps``: this process's reads are meant to carry kernel arrival stamps (Linux,
    not turned off); once it has read, what its reads actually carried decides. That mode
    picks the one event-loop lag limit used in every message of the run.
    ``on_window``: called with every judged window and its verdict (tracing, calibration).
    """

    def __init__(self, config: SelfCheckConfig | None = None, *, mono_ns: Callable[[], int] = time.perf_counter_ns,
                 wall_ns: Callable[[], int] = time.time_ns, node: str = "local", kernel_stamps: bool = True,
                 on_window: Callable[[Window, Verdict], None] | None = None) -> None:  # fmt: skip
        self.config = config or SelfCheckConfig()
        self.mono_ns, self.wall_ns, self.node = mono_ns, wall_ns, node
        self.kernel_stamps, self.on_window = kernel_stamps, on_window
        self.reset()

    def reset(self) -> None:
        self.lags: deque[tuple[int, int]] = deque()  # (t_ns, lag_ns)
        self.samples: deque[Sample] = deque()
        self.start: Sample | None = None  # the run's first sample: first tokens are judged over the run
        self.from_unix: float | None = None
        self.last_unix: float | None = None
        self.windows = 0
        self.saturated_windows = 0
        self.reasons: set[str] = set()
        self.suspect: set[str] = set()
        self.causes: set[str] = set()
        self.max: dict[str, float | None] = dict.fromkeys(HEALTH)
        self.worst: dict[str, float | None] = dict.fromkeys(HEALTH)  # over saturated windows
        self.server_windows = 0
        self.server_max_pct: float | None = None
        self.note: str | None = None  # said once: the server wrote events together
        self.last: Sample | None = None

    @property
    def saturated(self) -> bool:
        return self.from_unix is not None

    @property
    def kernel(self) -> bool:
        """Whether reads carry kernel stamps: by what they carried so far, once there are
        enough of them; before that, by what this process asked for."""
        last = self.last
        if last is None or last.counts.reads < MIN_READS:
            return self.kernel_stamps
        return 2 * last.counts.kernel_stamped >= last.counts.reads

    def add_lag(self, lag_ns: int) -> None:
        self.lags.append((self.mono_ns(), max(0, lag_ns)))

    def evaluate(self, cpu_s: float, reads: tuple[int, ...] = (), *,
                 wait_s: float | None = None, pressure_s: float | None = None,
                 full_gcs: int | None = None) -> str | None:  # fmt: skip
        """Close an evaluation step with the process's CPU time and its cumulative counters:
        reads (``client.stamps.READS.counts()``, or its fields in order), run-queue wait and machine CPU pressure seconds, full
        collections (``sources``; None where not offered). Returns a warning the first time
        the window makes figures suspect, and again if more figures become suspect."""
        sample = Sample(
            self.mono_ns(), cpu_s, ReadCounts(*reads), wait_s=wait_s, pressure_s=pressure_s, full_gcs=full_gcs
        )
        self.samples.append(sample)
        self.last = sample
        if self.start is None:
            self.start = sample
        self._trim(sample.t_ns)
        window = self.window()
        if window is None:
            return None  # not a full window yet: no verdict on a warm-up blip
        kernel = self.kernel
        verdict = judge(window, self.config, kernel)
        self.windows += 1
        self._keep(self.max, window)
        if self.on_window is not None:
            self.on_window(window, verdict)
        if verdict.server:
            self._server(window)
        return self._saturated(verdict, window, kernel) if verdict.saturated else None

    def _saturated(self, verdict: Verdict, window: Window, kernel: bool) -> str | None:
        self.saturated_windows += 1
        self._keep(self.worst, window)
        self.last_unix = self.wall_ns() / 1e9
        new_suspect = verdict.suspect - self.suspect
        self.reasons |= verdict.reasons
        self.suspect |= verdict.suspect
        self.causes.add(verdict.cause or "busy")
        if self.from_unix is None:
            self.from_unix = self.last_unix - self.config.window_s
            return messages.onset(
                self.node, self.from_unix, verdict, window, self.config, kernel, self.suspect_list()
            )
        if new_suspect:
            return messages.worse(
                self.node, self.last_unix, verdict, window, self.config, kernel, self.suspect_list()
            )
        return None

    def _server(self, window: Window) -> None:
        self.server_windows += 1
        self.server_max_pct = _max(self.server_max_pct, window.coalesced_event_pct)
        if self.note is None:
            at = self.wall_ns() / 1e9 - self.config.window_s
            self.note = messages.server_note(self.node, at, window, self.config)

    @staticmethod
    def _keep(into: dict[str, float | None], window: Window) -> None:
        for name in HEALTH:
            into[name] = _max(into[name], getattr(window, name))

    def suspect_list(self) -> list[str]:
        return [name for name in SUSPECT if name in self.suspect]

    def cause_list(self) -> list[str]:
        return [c for c in CAUSES if c in self.causes]

    def _trim(self, now: int) -> None:
        horizon = now - int(self.config.window_s * 1e9)
        while self.lags and self.lags[0][0] < horizon:
            self.lags.popleft()
        # Keep one sample at or before the horizon so the window spans all of it.
        while len(self.samples) > 1 and self.samples[1].t_ns <= horizon:
            self.samples.popleft()

    def window(self) -> Window | None:
        """The current window's measures; None before a full window (or without lags)."""
        if len(self.samples) < 2 or not self.lags:
            return None
        first, last = self.samples[0], self.samples[-1]
        if last.t_ns - first.t_ns < int(self.config.window_s * 1e9 * 0.9):
            return None
        return measure(first, last, [lag for _, lag in self.lags], self.start)

    def manifest_field(self) -> dict[str, Any] | None:
        """``client_saturation`` for the report manifest; None while never saturated."""
        if self.from_unix is None:
            return None
        w = self.worst
        return {"node": self.node, "from_unix": round(self.from_unix, 3), "last_unix": _round(self.last_unix),
                "max_lag_ms": _round(w["lag_p99_ms"]), "max_cpu": _round(w["cpu_pct"], 1),
                "max_late_read_pct": _round(w["late_pct"]), "max_coalesced_read_pct": _round(w["coalesced_pct"]),
                "max_first_coalesced_pct": _round(w["first_coalesced_pct"]),
                "max_late_coalesced_event_pct": _round(w["late_coalesced_event_pct"]),
                "max_first_late_coalesced_pct": _round(w["first_late_coalesced_pct"]),
                "max_client_coalesced_event_pct": _round(w["client_coalesced_event_pct"]),
                "max_first_client_coalesced_pct": _round(w["first_client_coalesced_pct"]),
                "max_run_queue_wait_pct": _round(w["wait_pct"], 2), "reasons": sorted(self.reasons),
                "causes": self.cause_list(), "saturated_windows": self.saturated_windows, "windows": self.windows,
                "suspect": self.suspect_list()}  # fmt: skip

    def health_field(self) -> dict[str, Any]:
        """``client_selfcheck``: what was measured, saturated or not (None: not measured)."""
        m, cfg = self.max, self.config
        return {"node": self.node, "windows": self.windows, "kernel_stamps": self.kernel,
                "max_lag_ms": _round(m["lag_p99_ms"]), "max_lag_max_ms": _round(m["lag_max_ms"]),
                "max_cpu": _round(m["cpu_pct"], 1), "max_run_queue_wait_pct": _round(m["wait_pct"], 2),
                "max_cpu_pressure_pct": _round(m["pressure_pct"], 1),
                "max_late_read_pct": _round(m["late_pct"]), "max_coalesced_read_pct": _round(m["coalesced_pct"]),
                "max_first_coalesced_pct": _round(m["first_coalesced_pct"]),
                "max_coalesced_event_pct": _round(m["coalesced_event_pct"]),
                "max_late_coalesced_event_pct": _round(m["late_coalesced_event_pct"]),
                "max_first_late_coalesced_pct": _round(m["first_late_coalesced_pct"]),
                "max_client_coalesced_event_pct": _round(m["client_coalesced_event_pct"]),
                "max_first_client_coalesced_pct": _round(m["first_client_coalesced_pct"]),
                "server_coalesced": None if not self.server_windows else
                {"windows": self.server_windows, "max_coalesced_event_pct": _round(self.server_max_pct)},
                "lag_limit_ms": cfg.lag_limit_ms(self.kernel), "cpu_limit_pct": cfg.cpu_pct,
                "coalesced_limit_pct": cfg.coalesced_pct, "late_read_ms": cfg.late_ms}  # fmt: skip

    def summary_message(self) -> str | None:
        """At stop: the worst values seen, so a master's report has them for every worker."""
        if self.from_unix is None:
            return None
        w = self.worst
        # The worsts of different windows: no one late share to weigh them by (late_share 0).
        worst = Window(span_s=0.0, cpu_pct=w["cpu_pct"] or 0.0, lag_p99_ms=w["lag_p99_ms"] or 0.0,
                       lag_max_ms=w["lag_max_ms"] or 0.0, coalesced_pct=w["coalesced_pct"],
                       first_coalesced_pct=w["first_coalesced_pct"], coalesced_event_pct=w["coalesced_event_pct"],
                       late_coalesced_event_pct=w["late_coalesced_event_pct"],
                       first_late_coalesced_pct=w["first_late_coalesced_pct"],
                       client_coalesced_event_pct=w["client_coalesced_event_pct"],
                       first_client_coalesced_pct=w["first_client_coalesced_pct"])  # fmt: skip
        text = "worst " + messages.tripped(self.reasons, worst, self.config, self.kernel)
        span = (self.from_unix, self.last_unix or self.from_unix)
        return messages.summary(self.node, self.windows, self.saturated_windows, span, text, self.cause_list(),
                                self.suspect_list())  # fmt: skip
