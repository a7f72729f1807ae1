"""Client self-check: is this load-generating process itself the bottleneck?

A load generator that runs out of CPU reports its own queueing as the server's latency.
Every process that sends traffic (local run or worker) watches, over a rolling window
(docs/self-check.md has the whole story and the calibration):

- the **arrival path**: reads that held several token events (a read knows only its newest
  byte's arrival, so the earlier events are stamped late by the time they sat unread), and
  how long kernel-stamped reads' data waited in their sockets;
- the **event-loop lag** of a probe greenlet;
- the process's **CPU**, its **run-queue wait** (time it was runnable while other processes
  held the CPU; ``/proc/thread-self/schedstat``), the machine's CPU pressure (PSI) and full
  garbage collections, to tell causes apart.

A verdict (``verdict.judge``) names the measure over its limit and its cause: this process
busy, starved by others, its loop stalled — which make figures suspect — or the server
writing events together while the client was on time, which is said once as a property
of the server's output and makes nothing suspect. ``messages`` renders every word of it.

Modules: ``sources`` (kernel and interpreter counters), ``window`` (one window's measures),
``verdict`` (limits, causes, suspect figures), ``messages`` (the text), ``monitor`` (the
rolling window), ``probe`` (the probe greenlet, on the loop its caller hands it). No gevent and
no Locust: ``loadkit/locust/selfcheck.py`` runs the probe on gevent in a Locust run.
"""

from loadkit.selfcheck.monitor import SaturationMonitor
from loadkit.selfcheck.probe import LogOnlyStats, SelfCheck, read_stats
from loadkit.selfcheck.sources import process_cpu_s
from loadkit.selfcheck.verdict import (
    COALESCED_LIMIT_PCT,
    SEND_SUSPECT,
    SUSPECT,
    TIMING_SUSPECT,
    SelfCheckConfig,
    Verdict,
    judge,
)
from loadkit.selfcheck.window import MIN_FIRSTS, MIN_READS, Sample, Window, p99

__all__ = [
    "COALESCED_LIMIT_PCT", "MIN_FIRSTS", "MIN_READS", "SEND_SUSPECT", "SUSPECT", "TIMING_SUSPECT", "LogOnlyStats",
    "Sample", "SaturationMonitor", "SelfCheck", "SelfCheckConfig", "Verdict", "Window", "judge", "p99", "process_cpu_s", "read_stats",
]  # fmt: skip
