"""gevent's hub as the event loop the stats give way to (``loadkit/stats/turns.py``).

The stats import no event loop; this installs Locust's, once per process, from the ``init``
listener, before any live report, console table or worker snapshot is built.
"""

from __future__ import annotations

import gevent
from gevent import getcurrent

from loadkit.stats import turns


def _can_switch() -> bool:
    # The hub runs callbacks (timers, a socket's readiness) that must return, not switch out.
    return getcurrent() is not gevent.get_hub()


def _turn(seconds: float) -> None:
    # Not sleep(0): the hub runs callbacks queued meanwhile (sleep(0)'s own among them) for up
    # to the switch interval (5 ms) before it polls sockets again, so the reads would wait as
    # long as without yielding; measured: the same 5 ms ITL error. A timer makes the loop
    # poll; it returns at the first I/O or within epoll's 1 ms.
    gevent.sleep(seconds)


GEVENT_HUB = turns.Yield(task=getcurrent, can_switch=_can_switch, turn=_turn)


def install_gevent_yield() -> None:
    """Let the stats' long work (live reports, snapshots, batch flushes) yield to gevent's hub."""
    turns.set_yield(GEVENT_HUB)
