"""Stats per Locust user class: the report's ``user_classes`` section.

The request stats stay keyed by (engine, label); this is a second dimension over the same
records: per user class, per engine, per label, the same figures as the engine sections
(requests, outcomes, TTFT, TTFT from schedule, TPOT, E2E, tokens, rates, SLO attainment), from
the same formulas (``GroupStats``), merged exactly across workers. Two things are left out so
that the cost stays per request, not per token event: the ITL histograms (``itl_ms`` shows as
not measured; an ``itl_ms`` SLO is still judged on the largest gap, as in every view) and the
per-second series (the window, first send to last end, is kept for the rates, which use the engine's
window as label rates do).
"""

from __future__ import annotations

from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats import wallclock
from loadkit.stats.aggregate import GroupStats
from loadkit.stats.metrics import Slo
from loadkit.stats.report import group_section
from loadkit.stats.series import NS_PER_S
from loadkit.stats.turns import give_way

WIRE_VERSION = 1


class ClassGroup(GroupStats):
    """GroupStats of one (user class, engine, label) without ITL or series; see the module docstring."""

    __slots__ = ()

    def _add_itl(self, gaps: list[int], tokens: list[int]) -> None:
        # No ITL histograms here (work per token event); an itl_ms SLO is still judged on the
        # largest gap, computed once with the request's metrics, as in every view (metrics.py).
        return

    def _flush_series(self) -> None:
        starts, ends, _ = self.pending_series
        if not starts:
            return
        first = min(starts) + self.wall_offset_ns
        last = max(max(ends), max(starts)) + self.wall_offset_ns
        self.first_send_wall_ns = (
            first if self.first_send_wall_ns is None else min(self.first_send_wall_ns, first)
        )
        self.last_end_wall_ns = last if self.last_end_wall_ns is None else max(self.last_end_wall_ns, last)
        for column in self.pending_series:
            column.clear()


class ClassStats:
    """This node's per-class groups; mergeable and wire-able like the request stats."""

    def __init__(self, slos: tuple[Slo, ...] = (), wall_offset_ns: int | None = None) -> None:
        self.slos = slos
        # Monotonic → wall clock, taken once per node (as the request stats do): windows merge across nodes.
        self.wall_offset_ns = wallclock.wall_offset_ns() if wall_offset_ns is None else wall_offset_ns
        self.groups: dict[tuple[str, str, str], ClassGroup] = {}

    def add(self, r: RequestRecord) -> None:
        if r.user_class is None:
            return
        key = (r.user_class, r.engine, r.label)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = ClassGroup(self.wall_offset_ns, self.slos)
        group.add(r)

    def merge(self, other: ClassStats) -> None:
        for key, group in other.groups.items():
            self.groups.setdefault(key, ClassGroup()).merge(group)
            give_way()

    def flush(self) -> None:
        for group in list(self.groups.values()):
            group.flush()

    def to_wire(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "groups": [[*key, g.to_wire()] for key, g in self.groups.items()]}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ClassStats:
        if data.get("v") != WIRE_VERSION:
            raise ValueError(f"user class stats payload version {data.get('v')!r}, expected {WIRE_VERSION}")
        out = cls()
        for user_class, engine, label, wire in data["groups"]:
            out.groups[(user_class, engine, label)] = ClassGroup.from_wire(wire)  # type: ignore[assignment]
        return out

    def report(self) -> dict[str, Any]:
        """Per class: its totals, then per engine its totals and its labels. Rates use the
        engine's window (every class's requests to it) and, for a class's totals, the run's, so
        the classes' rates add up to the engine's, as its labels' do."""
        tree: dict[str, dict[str, dict[str, ClassGroup]]] = {}
        for (user_class, engine, label), group in sorted(self.groups.items()):
            tree.setdefault(user_class, {}).setdefault(engine, {})[label] = group
        engines_seen = {k[1] for k in self.groups}
        engine_s = {e: _window([g for k, g in self.groups.items() if k[1] == e]) for e in engines_seen}
        run_s = _window(list(self.groups.values()))
        out: dict[str, Any] = {}
        for user_class, engines in tree.items():
            total, sections = ClassGroup(), {}
            for engine, labels in engines.items():
                engine_total = ClassGroup()
                for group in labels.values():
                    engine_total.merge(group)
                    give_way()
                seconds = engine_s[engine]
                sections[engine] = {**group_section(engine_total, self.slos, seconds),
                                    "labels": {k: group_section(g, self.slos, seconds) for k, g in labels.items()}}  # fmt: skip
                total.merge(engine_total)
            out[user_class] = {**group_section(total, self.slos, run_s), "engines": sections}
        return out


def _window(groups: list[ClassGroup]) -> float | None:
    """Seconds from the first send to the last end over ``groups`` (None: nothing measured)."""
    firsts, lasts = [], []
    for group in groups:
        group.flush()  # the window is the series' (merge takes the same min and max)
        if group.first_send_wall_ns is not None and group.last_end_wall_ns is not None:
            firsts.append(group.first_send_wall_ns)
            lasts.append(group.last_end_wall_ns)
    return (max(lasts) - min(firsts)) / NS_PER_S if firsts else None
