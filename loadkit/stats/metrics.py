"""The one place that says which metrics loadkit measures and how an SLO is judged.

Every view of the records (engine and label sections in aggregate.py, stages, tenants, user
classes, sessions, length buckets) imports its metric names from here and judges a request
with ``meets`` / ``judge``, so the figures cannot disagree. The rule (docs/metrics.md,
"How an SLO is judged"):

- a ``cancelled`` request (the run ended while it streamed) is not judged: neither good nor bad;
- any other outcome that is not ``ok`` is judged and is not good;
- an ``ok`` request is good unless one of its measured SLO values exceeds its limit; a value
  that cannot be measured (TPOT of a 1-token reply, ITL of a one-event stream) cannot violate
  (the DistServe goodput convention; "not measured" is None, never 0);
- ``itl_ms`` is judged on the request's largest gap between two consecutive stream events.

Adding a metric: one line in ``TIME_METRICS`` (or ``TOKEN_METRICS``) of ``loadkit/metricnames.py``
gives it a histogram in every engine/label/class section and a row in the CSV; one line in
``SLO_KEYS`` there plus its value in ``RequestMetrics.slo_values`` (loadkit/formulas.py) makes it an SLO key for ``--slo``,
the scenario's ``[slo]`` and every view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from loadkit.metricnames import (  # noqa: F401 (re-exported: the views import the names from here)
    CHANNEL_TIME_METRICS,
    LIVE_METRICS,
    METRICS,
    SLO_KEYS,
    STAGE_METRICS,
    TIME_METRICS,
    TOKEN_METRICS,
)
from loadkit.records import RequestRecord, metrics_of
from loadkit.types import CANCELLED, OK

SLO_SLOT = {key: i for i, key in enumerate(SLO_KEYS)}

# Per-key verdict slots: [met, violated, not_measured] (report "attainment" counts).
MET, VIOLATED, NOT_MEASURED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Slo:
    """One service-level objective: the request's ``key`` metric must be ≤ ``limit_ms``."""

    key: str
    limit_ms: float

    @property
    def limit_ns(self) -> int:
        return round(self.limit_ms * 1_000_000)


SloLike = Mapping[str, float] | Iterable[Slo]
Compiled = tuple[tuple[int, str, int], ...]  # (slot in slo_values_ns, key, limit in ns)


def as_slos(slos: SloLike | None) -> tuple[Slo, ...]:
    """SLOs as given anywhere (``{"tpot_ms": 50}`` or Slo objects) as a tuple of Slo."""
    if not slos:
        return ()
    if isinstance(slos, Mapping):
        return tuple(Slo(str(k), float(v)) for k, v in slos.items())
    return tuple(slos)


def compile_slos(slos: SloLike | None) -> Compiled:
    """Once per collector, not per request: the SLOs as (slot, key, limit_ns) triples."""
    return tuple((SLO_SLOT[s.key], s.key, s.limit_ns) for s in as_slos(slos))


def slo_values_ns(r: RequestRecord) -> tuple[int | None, ...]:
    """An ok request's SLO values in ns, in ``SLO_KEYS`` order; None where not measured. A view
    over the request's metrics (loadkit.formulas' RequestMetrics, computed once per finished
    record, the same values every view and the raw log use), so no view walks the events again."""
    return metrics_of(r).slo_values


def judge(values: tuple[int | None, ...], slos: Compiled, counts: dict[str, list[int]] | None = None) -> bool:
    """Whether an ok request with these ``slo_values_ns`` is good; tallies each key's verdict
    into ``counts`` ([met, violated, not_measured]) when given. Not measured cannot violate."""
    good = True
    for slot, key, limit in slos:
        value = values[slot]
        verdict = NOT_MEASURED if value is None else MET if value <= limit else VIOLATED
        if counts is not None:
            tally = counts.get(key)
            if tally is None:
                tally = counts[key] = [0, 0, 0]
            tally[verdict] += 1
        if verdict == VIOLATED:
            good = False
    return good


def meets(r: RequestRecord, slos: SloLike | Compiled | None) -> bool | None:
    """The verdict on one request: True good, False judged and not good, None not judged
    (``cancelled``). ``slos`` as a dict, Slo objects or ``compile_slos``'s result."""
    if r.outcome == CANCELLED:
        return None
    if r.outcome != OK:
        return False
    compiled = slos if _is_compiled(slos) else compile_slos(slos)  # type: ignore[arg-type]
    return judge(slo_values_ns(r), compiled)  # type: ignore[arg-type]


def _is_compiled(slos: object) -> bool:
    return isinstance(slos, tuple) and all(isinstance(s, tuple) for s in slos)
