"""The verdict on one window: which measures passed their limits, why, and which figures
that makes suspect.

Three measures have a limit (one each, the same in every message):

- ``cpu``: the process's CPU time over ``cpu_pct`` of one core;
- ``event_loop_lag``: the probe's lag p99 over ``send_lag_ms`` when reads carry kernel
  stamps (the lag then only delays sends), over ``lag_ms`` when they are stamped in user
  space (every timestamp then carries it). Which applies is a property of the process
  (see ``SaturationMonitor.kernel``), not of one window;
- ``arrival_lag``: over ``coalesced_pct`` of the window's reads held several token events,
  or of its first tokens came in such a read.

A read holding several events knows only its newest byte's arrival, so the earlier events
are stamped late by the time they sat unread. That is the client's fault only if it left
them unread. When it read on time, the *server* wrote the events together (a starved or
batching server catches up with back-to-back writes): they really arrived together and
their timestamps are right. So coalescing over its limit makes the token timestamps
suspect only when this process fell behind (``fell_behind``: with kernel stamps, its reads
waited in their sockets); otherwise the verdict says ``server`` and suspects nothing.

The cause, for advice (``cause_of``): ``busy`` (this process's CPU), ``starved`` (it waited
on a run queue while others ran), ``stall`` (its event loop was held: a long greenlet, a
garbage collection; or reads waited with neither to show for it). The hint levels that name
a cause are not limits: nothing trips on them alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadkit.selfcheck.window import MIN_COALESCED, Window

# Figures a saturated client distorts: every latency includes its queueing, ITL and TTFT
# absorb reads that coalesced while it was busy, open-loop sends go out late, and the
# offered load may fall short of the scenario's.
SUSPECT = ["ttft_ms", "ttft_sched_ms", "ttft_with_connect_ms", "itl_ms", "itl_chunk_ms", "tpot_ms", "e2e_ms",
           "connect_ms", "tls_ms", "throughput"]  # fmt: skip
# Late reads distort the token timestamps; late sends the schedule and the offered load.
TIMING_SUSPECT = ["ttft_ms", "ttft_sched_ms", "ttft_with_connect_ms", "itl_ms", "itl_chunk_ms", "tpot_ms", "e2e_ms"]
# A lagging loop also notices connects and handshakes late (their times are user-space stamps).
SEND_SUSPECT = ["ttft_sched_ms", "connect_ms", "tls_ms", "throughput"]
# Percent of reads (of first tokens) in reads holding several token events above which the
# ITL (TTFT) p99 moves: such a read spoils two or more ITL samples, and ~10 % of reads carry no
# token. Measured against the simulator's truth: 0.34 % coalesced gave ITL error p99 20 ms at
# 20 ms/token, while 0.07-0.31 % stayed accurate elsewhere: the edge is near 0.3 %.
COALESCED_LIMIT_PCT = 0.3

# Evidence that this process left sockets unread (hints, not limits: nothing trips on them
# alone; docs/self-check.md has the measurements behind them). Coalescing of the client's
# making needs a stretch in which it did not read for a whole token interval; every other
# socket that received data in that stretch then waited too, so reads whose data sat over
# ``late_ms`` in the socket come with it, about as many as the coalesced reads. A server's
# back-to-back writes, read by a process that is on time, leave none — even when that
# process waited for the CPU now and then.
LATE_SHARE = 0.5
# ... and more of them than a process on time has anyway: a SCHED_FIFO client at 6 % CPU,
# probe lag never over 1.1 ms, still had 0.6-1.4 % of its reads wait over 1 ms (its own
# periodic work; timestamps accurate, TTFT / ITL error p99 0.03-0.04 / 0.05-0.09 ms), so
# below this share the reads count only with CPU, run-queue wait or the probe behind them.
LATE_FLOOR_PCT = 2.0
BUSY_HINT_PCT = 60.0  # CPU: the reads of one burst queue behind each other for milliseconds
# Run-queue wait, % of wall time: 5 %, or at least as long as the process ran (an idle
# process woken by every token then waits for another's time slice at each wake-up). Light
# runs that stayed accurate on a loaded 2-core machine waited 1-3.6 % at 5 % CPU; with a
# CPU hog on the client's core, 5-33 % at 4 % CPU, TTFT error p99 8 ms.
STARVED_HINT_PCT = 5.0
STARVED_FLOOR_PCT = 2.0
STALL_HINT_MS = 10.0  # probe lag max: the loop was held for as long as a token interval

CAUSES = ("busy", "starved", "stall", "server")


@dataclass(frozen=True, slots=True)
class SelfCheckConfig:
    """Limits and cadence. ``cpu_pct``: process CPU in percent of one core; ``send_lag_ms``:
    limit on the event-loop lag p99 when reads carry kernel stamps (it only delays sends;
    closed loops of equal-length requests restart in bursts: 100 streams × 32 tokens, 22 %
    CPU, showed 5.7 ms); ``lag_ms``: the same limit when reads are stamped in user space;
    ``coalesced_pct``: reads (first tokens) holding several token events; ``late_ms``: a
    kernel-stamped read whose data waited longer than this in its socket counts as late
    (evidence that reads fell behind): the accuracy bound, since a coalesced read's earlier
    event is off by at most how long it waited. At 5 ms, windows whose reads waited 1-5 ms
    while the starved simulator's events came closer together were put down to the server
    (that run's ITL error p99: 2.4 ms)."""

    lag_ms: float = 5.0
    send_lag_ms: float = 20.0
    cpu_pct: float = 90.0
    coalesced_pct: float = COALESCED_LIMIT_PCT
    late_ms: float = 1.0
    window_s: float = 5.0
    probe_s: float = 0.02
    eval_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("lag_ms", "send_lag_ms", "cpu_pct", "coalesced_pct", "late_ms", "window_s", "probe_s",
                     "eval_s"):  # fmt: skip
            if not getattr(self, name) > 0:
                raise ValueError(f"self-check {name} must be > 0")

    def lag_limit_ms(self, kernel: bool) -> float:
        return self.send_lag_ms if kernel else self.lag_ms


@dataclass(frozen=True, slots=True)
class Verdict:
    """``reasons``: the measures over their limits that make figures suspect; ``cause``: why
    (busy, starved, stall; None when nothing is suspect); ``suspect``: those figures (empty:
    the client is fine); ``server``: reads holding several events were over their limit
    while this process read on time — the server wrote them together."""

    reasons: frozenset[str]
    cause: str | None
    suspect: frozenset[str]
    server: bool = False

    @property
    def saturated(self) -> bool:
        return bool(self.suspect)


CLEAR = Verdict(frozenset(), None, frozenset())


def coalesced_over(w: Window, cfg: SelfCheckConfig) -> bool:
    """Reads (first tokens) holding several events over their limit, and enough of them."""
    pairs = ((w.coalesced_pct, w.coalesced), (w.first_coalesced_pct, w.first_coalesced))
    return any(p is not None and p > cfg.coalesced_pct and n >= MIN_COALESCED for p, n in pairs)


def starved(w: Window) -> bool:
    """Other processes held the CPU this one was waiting for (needs schedstat)."""
    wait = w.wait_pct
    return wait is not None and (wait >= STARVED_HINT_PCT or (wait >= STARVED_FLOOR_PCT and wait >= w.cpu_pct))


def fell_behind(w: Window, kernel: bool) -> bool:
    """Whether this process left sockets unread in this window. With kernel stamps its reads
    say so themselves: they waited in their sockets (a busy, starved or lagging process
    whose reads stayed on time spoiled no timestamp: its coalesced reads are the server's),
    often, or with CPU, run-queue wait or the probe showing why. Without kernel stamps, the
    process measures alone."""
    behind = w.cpu_pct >= BUSY_HINT_PCT or starved(w) or w.lag_max_ms >= STALL_HINT_MS
    if not kernel:
        return behind
    waited = w.late > 0 and w.late >= LATE_SHARE * w.coalesced
    return waited and (behind or (w.late_pct or 0) >= LATE_FLOOR_PCT)


def cause_of(w: Window) -> str:
    """Why this process fell behind or lagged: starved, busy, or its loop stalled."""
    busy = w.cpu_pct >= BUSY_HINT_PCT
    if starved(w) and not (busy and (w.wait_pct or 0) < 2 * STARVED_HINT_PCT):
        return "starved"  # a busy process that also waits a little is busy: more workers help
    return "busy" if busy else "stall"


def judge(w: Window, cfg: SelfCheckConfig, kernel: bool) -> Verdict:
    """The verdict on window ``w``; ``kernel``: this process's reads carry kernel stamps.
    Each measure over its limit makes its own figures suspect; coalescing only when this
    process fell behind."""
    reasons, suspect = set(), set()
    if w.cpu_pct > cfg.cpu_pct:
        reasons.add("cpu")
        suspect |= set(SUSPECT)  # out of CPU: everything
    if w.lag_p99_ms > cfg.lag_limit_ms(kernel):
        reasons.add("event_loop_lag")  # user-space stamps carry the lag; kernel ones only the sends
        suspect |= set(SEND_SUSPECT if kernel else SUSPECT)
    server = False
    if coalesced_over(w, cfg):
        if fell_behind(w, kernel) or "cpu" in reasons:
            reasons.add("arrival_lag")
            suspect |= set(TIMING_SUSPECT)
        else:
            server = True
    if not suspect:
        return Verdict(frozenset(), None, frozenset(), server)
    return Verdict(frozenset(reasons), cause_of(w), frozenset(suspect), server)
