"""One rolling window's measures, from two samples of cumulative counters and the lag
probe's samples in between.

A ``Sample`` is what the self-check reads once per evaluation step; a ``Window`` is the
difference of the oldest and newest samples of the window, in the units a person reads
(percent, milliseconds). Measures that could not be taken are None, never 0: a window
with too few reads for a p99 has no read percentages, a kernel without schedstat no wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadkit.client.stamps import ReadCounts

# Fewer reads (first tokens) than this in a window: too few to judge their p99.
MIN_READS = 100
MIN_FIRSTS = 100
MIN_EVENTS = 100
# Share of a window's reads that waited over the late mark up to which a late coalesced read is
# weighed against chance (``client_share``). Past it most reads wait, a coalesced read of the
# client's making is hardly likelier late than any other, and every late one counts.
CHANCE_LATE_MAX = 0.5
# Fewer coalesced reads (first tokens in them) than this: a share over its limit is not
# judged. One or two in a window of a few hundred cannot move a p99 (a smoke run's last
# window: 1 read in 300 while the streams ended, timestamps accurate).
MIN_COALESCED = 3


@dataclass(frozen=True, slots=True)
class Sample:
    """Cumulative counters at one instant (``t_ns``: monotonic). ``counts`` are
    ``client.stamps.READS``'s; ``wait_s`` / ``pressure_s`` / ``full_gcs`` come from
    ``sources`` and are None where the kernel does not offer them."""

    t_ns: int
    cpu_s: float
    counts: ReadCounts = ReadCounts()
    wait_s: float | None = None
    pressure_s: float | None = None
    full_gcs: int | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """What happened over one window. Percentages of reads are of the window's reads
    (``late_pct``: of its kernel-stamped reads); ``coalesced_event_pct`` and
    ``late_coalesced_event_pct`` of its token events (the ITL samples), ``first_*`` of its
    first tokens (the TTFT samples) — of the run so far when the window had too few
    (``firsts_over_run``); ``wait_pct`` and ``pressure_pct`` of its wall time."""

    span_s: float
    cpu_pct: float
    lag_p99_ms: float
    lag_max_ms: float
    reads: int = 0
    kernel_reads: int = 0
    late: int = 0
    coalesced: int = 0
    first_coalesced: int = 0
    late_pct: float | None = None
    coalesced_pct: float | None = None
    first_coalesced_pct: float | None = None
    events: int = 0
    late_coalesced: int = 0
    first_late_coalesced: int = 0
    coalesced_event_pct: float | None = None
    late_coalesced_event_pct: float | None = None
    first_late_coalesced_pct: float | None = None
    client_coalesced_event_pct: float | None = None
    first_client_coalesced_pct: float | None = None
    late_share: float = 0.0
    firsts_over_run: bool = False
    firsts: int = 0  # first tokens the first_* shares are of (the run's so far when firsts_over_run)
    wait_pct: float | None = None
    pressure_pct: float | None = None
    full_gcs: int | None = None


def p99(values: list[int]) -> int:
    """Nearest-rank 99th percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]


def _pct(part: int, whole: int, least: int) -> float | None:
    return None if whole < least else 100.0 * part / whole


def client_share(late_pct: float | None, all_pct: float | None, late_share: float) -> float | None:
    """The part of ``late_pct`` (events in coalesced reads that waited) the client's lateness
    made, of the ``all_pct`` in coalesced reads, when a share ``late_share`` of all reads waited.

    A server that writes several events at once (a batching or catching-up server) has them read
    late as often as any read: ``late_share`` of them, by chance, and those events arrived
    together (their timestamps are right). Events the client left unread until the next came
    are read late (nearly) always. So of ``all`` coalesced, server-made ``s`` and the client's
    ``k``: ``late = late_share × s + k``, hence ``k = (late − late_share × all) / (1 −
    late_share)``. At 200 streams a step's reads queue behind each other and a quarter of them
    wait over 1 ms while accurate (TTFT / ITL error p99 0.05 ms): with a server writing 4 % of
    events together, 0.85 % came in late coalesced reads, none of them the client's doing."""
    if late_pct is None or all_pct is None:
        return late_pct
    if late_share <= 0.0 or late_share >= CHANCE_LATE_MAX:
        return late_pct
    mine = (late_pct - late_share * all_pct) / (1.0 - late_share)
    return min(late_pct, max(0.0, mine))


def _rate_pct(a: float | None, b: float | None, span_s: float) -> float | None:
    """100 × (b − a) / span for a cumulative seconds counter; None if either is missing."""
    return None if a is None or b is None else max(0.0, 100.0 * (b - a) / span_s)


def measure(first: Sample, last: Sample, lags_ns: list[int], run: Sample | None = None) -> Window:
    """The window between two samples; ``lags_ns``: the probe's lags inside it (non-empty).
    ``run``: the run's first sample. A window of a few users holds fewer first tokens than a
    p99 needs, while the run's TTFT p99 is moved by any one of its first tokens in a hundred:
    their shares are then those of the run so far."""
    span_s = (last.t_ns - first.t_ns) / 1e9

    def d(name: str, since: Sample = first) -> int:
        return getattr(last.counts, name) - getattr(since.counts, name)

    over_run = run is not None and d("firsts") < MIN_FIRSTS
    since = run if over_run and run is not None else first  # (run is not None: for the type checker)
    firsts, first_coalesced = d("firsts", since), d("first_coalesced", since)
    first_late = d("first_late_coalesced", since)
    least = 1 if over_run else MIN_FIRSTS

    reads, late, coalesced, events = d("reads"), d("late"), d("coalesced"), d("events")
    kernel = d("kernel_stamped")
    # The share of reads that waited, over the same span as the shares it is weighed against.
    share = late / kernel if kernel >= MIN_READS else 0.0
    since_kernel = d("kernel_stamped", since)
    first_share = d("late", since) / since_kernel if since_kernel >= MIN_READS else 0.0
    coalesced_event_pct = _pct(d("coalesced_events"), events, MIN_EVENTS)
    late_event_pct = _pct(d("late_coalesced_events"), events, MIN_EVENTS)
    first_coalesced_pct = _pct(first_coalesced, firsts, least)
    first_late_pct = _pct(first_late, firsts, least)
    gcs = None if first.full_gcs is None or last.full_gcs is None else last.full_gcs - first.full_gcs
    return Window(span_s=span_s, cpu_pct=100.0 * (last.cpu_s - first.cpu_s) / span_s,
                  lag_p99_ms=p99(lags_ns) / 1e6, lag_max_ms=max(lags_ns) / 1e6,
                  reads=reads, kernel_reads=kernel, late=late, coalesced=coalesced,
                  first_coalesced=first_coalesced, late_pct=_pct(late, kernel, MIN_READS),
                  coalesced_pct=_pct(coalesced, reads, MIN_READS), first_coalesced_pct=first_coalesced_pct,
                  events=events, late_coalesced=d("late_coalesced"),
                  first_late_coalesced=first_late, firsts_over_run=over_run, firsts=firsts,
                  coalesced_event_pct=coalesced_event_pct, late_coalesced_event_pct=late_event_pct,
                  first_late_coalesced_pct=first_late_pct,
                  client_coalesced_event_pct=client_share(late_event_pct, coalesced_event_pct, share),
                  first_client_coalesced_pct=client_share(first_late_pct, first_coalesced_pct, first_share),
                  late_share=share,
                  wait_pct=_rate_pct(first.wait_s, last.wait_s, span_s),
                  pressure_pct=_rate_pct(first.pressure_s, last.pressure_s, span_s), full_gcs=gcs)  # fmt: skip
