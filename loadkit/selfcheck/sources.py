"""What the kernel and the interpreter say about this process, read once per evaluation
step (never on the read path): its CPU time, how long its event-loop thread waited for a
CPU while runnable, the machine's CPU pressure, and how many full garbage collections ran.

Each reader returns cumulative values, or None where this kernel does not offer them
(not Linux, no schedstat, no PSI): the self-check then judges without that measure and
says so in its health field, rather than reading a missing counter as zero.
"""

from __future__ import annotations

import gc
import resource


def process_cpu_s() -> float:
    """User + system CPU seconds of this process (all threads)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# The calling thread's own line (the event-loop thread: the self-check runs in its hub);
# /proc/self is the thread-group leader, the same thread in a single-threaded Locust process.
SCHEDSTAT_PATHS = ("/proc/thread-self/schedstat", "/proc/self/schedstat")
PSI_CPU_PATH = "/proc/pressure/cpu"


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def run_queue_wait_s(paths: tuple[str, ...] = SCHEDSTAT_PATHS) -> float | None:
    """Seconds this thread has spent runnable but waiting on a run queue (schedstat field 2):
    time other processes held the CPU it needed. None where the kernel does not offer it."""
    for path in paths:
        text = _read(path)
        fields = text.split() if text else []
        if len(fields) >= 2 and fields[1].isdigit():
            return int(fields[1]) / 1e9
    return None


def cpu_pressure_s(path: str = PSI_CPU_PATH) -> float | None:
    """Seconds in which at least one task on the machine (or this cgroup, under cgroup v2)
    waited for a CPU: PSI's ``some total``. None without PSI (kernel < 4.20, or psi=0)."""
    text = _read(path)
    for line in (text or "").splitlines():
        if line.startswith("some "):
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                if key == "total" and value.isdigit():
                    return int(value) / 1e6
    return None


def full_collections() -> int:
    """Full (generation 2) garbage collections so far: each walks every tracked object with
    the event loop stopped (locust/stalls.py keeps most of the heap out of them)."""
    return int(gc.get_stats()[2]["collections"])
