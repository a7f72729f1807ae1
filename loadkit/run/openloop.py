"""Open-loop dispatch: virtual users take scheduled send times instead of sending back to back.

Locust users are closed loop; here they are a pool of senders. Each free user takes the next
scheduled time, sleeps until it, and sends with `t_sched` kept on the request, so TTFT from
schedule shows the queueing that closed-loop TTFT hides. The schedule can fall behind for two
reasons, and the warning at the end says which:

- every user was busy when a slot came due (all in flight: too few users for the asked rate at
  the server's latency, or the server is slower than that rate). Such a slot is already overdue
  when a user takes it, or is never taken before the run stops;
- a user was free and took the slot in time, but woke up late to send it: the load-generating
  process itself could not keep time (the client self-check measures why).

The lag (t_send − t_sched, with t_send the raw log's: taken at the write, after the prompt is
built) is measured, and a request later than `max_lag_s` when about to be sent is dropped and
counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from loadkit.stats.histogram import Histogram
from loadkit.stats.scheduletally import TargetTally
from loadkit.workload.warmcache import WARMUP_STAGE

NS = 1_000_000_000


class Dispatcher:
    """Hands out one process's share of the schedule to its users, in order."""

    def __init__(
        self,
        offsets: Iterator[tuple[float, str]],
        max_lag_s: float | None,
        late_s: float = 0.01,
        t0_ns: int | None = None,
    ) -> None:
        self._offsets = offsets
        # None until every sender exists (Locust's spawning_complete): a schedule that starts
        # while users are still being spawned would be late through no fault of anyone.
        self.t0_ns: int | None = t0_ns
        self.max_lag_ns = int(max_lag_s * NS) if max_lag_s else None
        self.late_ns = int(late_s * NS)
        self.late = 0
        self.lag = Histogram()  # ns, of every request actually sent
        self.taken = 0
        self.dropped = 0
        self.no_free_user = 0  # slots overdue when a user took them, or never taken: all users busy
        self.exhausted = False
        self._peek: tuple[int, str] | None = None
        # Warm-up slots (--warmup, a Mooncake window's warm_cache) are outside the measured
        # run: counted apart, not in the schedule's figures nor its lag (issue 31).
        self.warmup = {"scheduled": 0, "sent": 0, "dropped": 0}

    @property
    def started(self) -> bool:
        return self.t0_ns is not None

    def start(self, t0_ns: int | None = None) -> None:
        if self.t0_ns is None:
            self.t0_ns = t0_ns if t0_ns is not None else time.perf_counter_ns()

    def deal(self, offsets: Iterator[tuple[float, str]]) -> None:
        """Replace the send times, before the schedule starts (the master re-deals shares then)."""
        if self.t0_ns is not None:
            raise RuntimeError("schedule already started")
        self._offsets, self._peek = offsets, None

    def next_slot(self, now_ns: int | None = None) -> tuple[int, str] | None:
        """The next (t_sched_ns, stage) of this process, or None when the schedule is over.
        `now_ns` (default: the clock) is when a user asks, i.e. when one became free."""
        if self.t0_ns is None:
            raise RuntimeError("schedule not started")
        if self._peek is not None:
            slot, self._peek = self._peek, None
        else:
            try:
                offset_s, stage = next(self._offsets)
            except StopIteration:
                self.exhausted = True
                return None
            slot = (self.t0_ns + int(offset_s * NS), stage)
        if slot[1] == WARMUP_STAGE:
            self.warmup["scheduled"] += 1
            return slot
        self.taken += 1
        now = time.perf_counter_ns() if now_ns is None else now_ns
        if now - slot[0] > self.late_ns:
            self.no_free_user += 1  # it came due while no user was free to take it
        return slot

    def admit(self, t_sched_ns: int, now_ns: int, stage: str | None = None) -> bool:
        """``allow`` then ``sent``, for a request sent at ``now_ns``."""
        if not self.allow(t_sched_ns, now_ns, stage):
            return False
        self.sent(t_sched_ns, now_ns, stage)
        return True

    def allow(self, t_sched_ns: int, now_ns: int, stage: str | None = None) -> bool:
        """Just before send, prompt built: False (and counted dropped) when too late to be honest."""
        if self.max_lag_ns is not None and now_ns - t_sched_ns > self.max_lag_ns:
            if stage == WARMUP_STAGE:
                self.warmup["dropped"] += 1
            else:
                self.dropped += 1
            return False
        return True

    def sent(self, t_sched_ns: int, t_send_ns: int, stage: str | None = None) -> None:
        """A request of this schedule went out: its lag is t_send − t_sched, the raw log's
        definition (t_send taken at the write, after the prompt was built; docs/metrics.md)."""
        if stage == WARMUP_STAGE:
            self.warmup["sent"] += 1
            return
        late = t_send_ns - t_sched_ns
        if late > self.late_ns:
            self.late += 1
        self.lag.record(max(0, late))

    def give_back(self, stage: str | None = None) -> None:
        """A user stopped while waiting for a slot that was not yet due: it was never scheduled."""
        if stage == WARMUP_STAGE:
            self.warmup["scheduled"] -= 1
        else:
            self.taken -= 1

    def drop_overdue(self, now_ns: int) -> int:
        """At test stop: slots whose time came but no user was free to take are dropped."""
        if self.t0_ns is None:
            return 0
        n = 0
        while True:
            if self._peek is None:
                try:
                    offset_s, stage = next(self._offsets)
                except StopIteration:
                    return n
                self._peek = (self.t0_ns + int(offset_s * NS), stage)
            if self._peek[0] > now_ns:
                return n
            stage, self._peek = self._peek[1], None
            if stage == WARMUP_STAGE:
                self.warmup["scheduled"] += 1
                self.warmup["dropped"] += 1
                continue
            self.taken += 1
            self.dropped += 1
            self.no_free_user += 1
            n += 1

    def tally(self) -> TargetTally:
        """This process's counts of its share, and its sends' lags (a copy), for the report."""
        return TargetTally(self.taken, self.dropped, self.late, self.no_free_user, dict(self.warmup),
                           self.lag.copy())  # fmt: skip

    def summary(self) -> dict[str, Any]:
        return self.tally().summary()


# Fewer late sends than this (and none dropped) are not called a fallen-behind schedule: in a
# short run the p99 of a few dozen sends is their largest, so one 15 ms hiccup of a loaded
# machine (the README demo: 1 of 65 sends, the process at 7 % CPU and on time) read "client was
# the bottleneck ... add workers". The report's schedule section still has every lag figure.
MIN_LATE_SENDS = 3


def behind_warning(
    target: str, s: dict[str, float | int | None], late_threshold_ms: float, client_saturated: bool = False
) -> str | None:
    """The end-of-run warning for one target's schedule `summary`, None when it kept time.

    When most late or dropped slots came due while every user was busy, the user pool or the
    server is the limit, not the client; otherwise users were free but sent late, and the
    client itself was the bottleneck. `client_saturated`: the self-check found this process
    saturated, which makes users finish (and so become free) late too."""
    late, dropped, busy = int(s["late"] or 0), int(s["dropped"] or 0), int(s["no_free_user"] or 0)
    if not dropped and ((s["lag_p99_ms"] or 0) <= late_threshold_ms or late < MIN_LATE_SENDS):
        return None
    p99 = s["lag_p99_ms"]
    figures = (
        f"lag p99 {'-' if p99 is None else f'{p99:.1f}'} ms (limit {late_threshold_ms:g} ms), "
        f"{late} late, {dropped} dropped"
    )
    if 2 * busy >= late + dropped:
        return (
            f"open-loop schedule fell behind for target {target}: every user was busy (in flight) when "
            f"{busy} of the {late + dropped} late or dropped requests came due ({figures}): the server is "
            "slower than the asked rate, or more users (-u) are needed to keep it; TTFT from schedule "
            "includes the wait for a free user"
            + (
                "; the client self-check also found this process saturated, which delays users too: "
                "add workers (--processes)"
                if client_saturated
                else ""
            )
        )
    return (
        f"client was the bottleneck for target {target}: open-loop sends went out late although users "
        f"were free ({figures}; {busy} came due with every user busy): this process could not keep time "
        "(see the client self-check); add workers (--processes): latencies here include client queueing"
    )
