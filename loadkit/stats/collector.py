"""StatsCollector: the per-process stats object every node holds; Locust-free.

On a node that sends traffic (local, worker) the user class calls ``add(record)`` once per
finished request. On the master, worker snapshots arrive through ``accept_snapshot`` and
``report()`` merges them with whatever this node recorded itself.
"""

from __future__ import annotations

import functools
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats import turns, wallclock
from loadkit.stats.aggregate import GroupStats
from loadkit.stats.distributed import NodeSnapshot, RemoteSnapshots, encode_snapshot
from loadkit.stats.metrics import Slo, SloLike, as_slos, compile_slos
from loadkit.stats.rawlog import RawLog
from loadkit.stats.report import build_report
from loadkit.stats.sections import Section, merged
from loadkit.stats.validity import DEFAULT_MAX_FAILED_SHARE

log = logging.getLogger("loadkit.stats")

# Errors kept verbatim in the report; beyond this only the count grows.
MAX_ERRORS_KEPT = 20


# Sections whose figures a live view (the console table every few seconds, the web UI's polls)
# may take from an earlier live report: the delivered-load section reads every request's send
# and end (seconds of CPU per report on a master of hundreds of workers in a long run). A live
# report recomputes it once LIVE_SHARE of the time since it was last computed would pay for it,
# so it costs a live view at most that share of the master's loop; while it is cheap, that is
# every time. The final report always computes everything.
LIVE_THROTTLED = frozenset({"delivered"})
LIVE_SHARE = 0.05


class StatsCollector:
    """Aggregates RequestRecords per (engine, label); see the module docstring."""

    def __init__(self, slos: tuple[Slo, ...] = (), *, raw_log: RawLog | None = None,
                 wall_clock_ns: Callable[[], int] = time.time_ns,
                 mono_clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:  # fmt: skip
        self.set_slos(slos)
        self.raw_log = raw_log
        self._wall_clock_ns = wall_clock_ns
        self._mono_clock_ns = mono_clock_ns
        # Views beside the engine stats (stats/sections.py): registered once, kept across resets.
        self.section_defs: dict[str, Section] = {}
        self._feeds: list[Section] = []  # sections fed per measured record
        self._warmup_feeds: list[Section] = []  # ... and per warm-up record
        self.remote = RemoteSnapshots(self.section_defs)
        # A live report's throttled sections: when computed (live_clock), in how long, the figures.
        self._live_sections: dict[str, tuple[float, float, Any]] = {}
        self.live_clock: Callable[[], float] = time.monotonic
        self.manifest: dict[str, Any] = {}
        self.worker_index: int | None = None
        self.seq = 0  # per process, never reset: the master drops anything not newer
        self.epoch = 0  # bumped at every reset so the master can drop pre-reset snapshots
        self.reset_listeners: list[Callable[[], None]] = []
        # Extra top-level report sections computed on demand (e.g. session stats from the glue).
        self.sections: dict[str, Callable[[], Any]] = {}
        # Sections computed after all others, from the report so far (add_derived_section).
        self.derived_sections: dict[str, Callable[[dict[str, Any]], Any]] = {}
        # Manifest fields computed at report time (over every node's snapshot); None: left out.
        self.manifest_providers: dict[str, Callable[[], Any]] = {}
        # Reasons the run is invalid that live outside the stats (e.g. the glue's start error),
        # asked at every report; they survive resets, their owners clear them.
        self.invalid_sources: list[Callable[[], list[str]]] = []
        self.max_failed_share = DEFAULT_MAX_FAILED_SHARE
        self._clear()

    def _clear(self) -> None:
        self.groups: dict[tuple[str, str], GroupStats] = {}
        self.scheduled = 0
        self.dropped = 0
        self.errors: list[str] = []
        self.error_count = 0
        self.warnings: list[str] = []
        self.invalid: list[str] = []
        self.started_wall_ns = self._wall_clock_ns() + wallclock.correction_ns()
        self.stopped_wall_ns: int | None = None
        # Monotonic → wall offset, taken once: intervals stay monotonic, only labels use it.
        self.wall_offset_ns = self.started_wall_ns - self._mono_clock_ns()
        self.section_states: dict[str, Any] = {name: s.new() for name, s in self.section_defs.items()}

    # -- hot path (local / worker) --------------------------------------------------------

    def add(self, record: RequestRecord) -> None:
        """Count one finished request. Never raises: a failure marks the run invalid."""
        try:
            # Its metrics, once, for the raw log, the engine stats and every section.
            record.measure()
            key = (record.engine, record.label)
            group = self.groups.get(key)
            if group is None:
                group = self.groups[key] = GroupStats(self.wall_offset_ns, self.slos)
            # The raw line first: group.add may give way (a batch flush, turns.py), and a
            # worker's snapshot taken meanwhile must not count a request its log lacks.
            if self.raw_log is not None:
                self.raw_log.write(record, self.wall_offset_ns)
            group.add(record)
            self._feed(self._feeds, record)
        except Exception as exc:  # the user's greenlet must live on; the report says invalid
            self.fail(f"stats path failed on request {getattr(record, 'request_id', '?')}", exc)

    def add_warmup(self, record: RequestRecord) -> None:
        """A warm-up request: outside the run's stats, shown only by the sections that ask."""
        try:
            record.measure()
            self._feed(self._warmup_feeds, record)
        except Exception as exc:
            self.fail(f"stats path failed on warm-up request {getattr(record, 'request_id', '?')}", exc)

    def _feed(self, sections: list[Section], record: RequestRecord) -> None:
        states = self.section_states
        for section in sections:
            section.add(states[section.name], record)  # type: ignore[misc]

    def add_scheduled(self, n: int = 1) -> None:
        """Open loop: ``n`` requests came due (conservation: scheduled = sent + dropped)."""
        self.scheduled += n

    def add_dropped(self, n: int = 1) -> None:
        """Open loop: ``n`` due requests were never sent (e.g. no free user)."""
        self.dropped += n

    def fail(self, what: str, exc: BaseException | None = None) -> None:
        """Record an error in the stats path: logged, kept in the report, run marked invalid."""
        self.error_count += 1
        detail = f"{what}: {exc!r}" if exc is not None else what
        if len(self.errors) < MAX_ERRORS_KEPT:  # a failure per request must not flood the log
            self.errors.append(detail)
            log.error("%s\n%s", detail, traceback.format_exc() if exc is not None else "")

    def mark_invalid(self, reason: str) -> None:
        """Mark the run invalid for a reason found outside the stats path (a plugin hook, a
        circuit breaker that stopped the run). The reason is shown verbatim, first, as why the
        run is invalid (report ``invalid_reasons``, console, HTML, web UI); given twice, once."""
        if reason not in self.invalid:
            self.invalid.append(reason)
            log.error("loadkit: run marked invalid: %s", reason)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            log.warning(message)

    # -- lifecycle ------------------------------------------------------------------------

    def set_slos(self, slos: SloLike | None) -> None:
        """The one place the run's SLOs enter the stats: engine groups created from now on and
        every section's new state judge against them (call before ``reset`` at a test start)."""
        self.slos: tuple[Slo, ...] = as_slos(slos)
        self.compiled_slos = compile_slos(self.slos)

    @property
    def slo_limits(self) -> dict[str, float]:
        return {s.key: s.limit_ms for s in self.slos}

    def register_section(self, section: Section) -> None:
        """Make ``section`` part of this collector: fed, reset, shipped and merged with the rest."""
        self.section_defs[section.name] = section
        self.section_states[section.name] = section.new()
        for feeds, wanted in ((self._feeds, True), (self._warmup_feeds, section.warmup)):
            feeds[:] = [s for s in feeds if s.name != section.name]
            if section.add is not None and wanted:
                feeds.append(section)

    def section(self, name: str) -> Any:
        """This node's current state of section ``name`` (e.g. to feed it sessions as they end)."""
        return self.section_states[name]

    def merged_section(self, name: str) -> Any:
        """Section ``name`` over this node and every worker's newest snapshot (lost ones too)."""
        remote = [node.sections.get(name) for node in self.remote.snapshots()]
        return merged(self.section_defs[name], [self.section_states[name], *remote])

    def set_manifest_fields(self, fields: dict[str, Any]) -> None:
        """Merge ``fields`` into the report's manifest (scenario, engines, server info ...)."""
        self.manifest.update(fields)

    def reset(self, propagate: bool = True) -> None:
        """Forget every count (new run or stats reset). With ``propagate`` the reset listeners
        run too: on the master they tell every worker to reset."""
        self.epoch += 1
        self._clear()
        self._live_sections.clear()
        self.remote.reset()
        if propagate:
            for listener in self.reset_listeners:
                listener()

    def mark_stopped(self) -> None:
        self.stopped_wall_ns = self._wall_clock_ns() + wallclock.correction_ns()

    # -- snapshots and reports ------------------------------------------------------------

    def local_snapshot(self, copy_groups: bool = False) -> NodeSnapshot:
        """This node's state now. ``copy_groups`` (a live report that gives way: turns.py): the
        groups are copied first, giving way between them, and the counters read after: requests
        end meanwhile, and one counted as sent was scheduled before, so scheduled ≥ sent holds."""
        groups = self.groups
        if copy_groups:
            groups = {}
            for key, group in list(self.groups.items()):
                groups[key] = copy = GroupStats()
                copy.merge(group)
                turns.give_way()
        errors = list(self.errors)
        if self.error_count > len(errors):
            errors.append(f"... and {self.error_count - len(errors)} more stats-path errors")
        return NodeSnapshot(groups, self.scheduled, self.dropped, errors, list(self.warnings),
                            list(self.invalid), dict(self.section_states))  # fmt: skip

    def flush_pending(self) -> None:
        """Move every pending value into its histograms (giving way between them in a
        cooperative stretch), so that a snapshot taken next has little left to do at once."""
        for group in list(self.groups.values()):
            group.flush()
        for state in list(self.section_states.values()):
            flush = getattr(state, "flush", None)
            if flush is not None:
                flush()

    def snapshot_payload(self, final: bool = False) -> dict[str, Any]:
        """The next cumulative snapshot for the master (worker side); bumps the sequence number."""
        self.seq += 1
        return encode_snapshot(self.local_snapshot(), seq=self.seq, epoch=self.epoch,
                               worker=self.worker_index, final=final)  # fmt: skip

    def accept_snapshot(self, client_id: str, payload: dict[str, Any]) -> str:
        """Master side: take a worker's snapshot ("accepted" / "stale" / "rejected")."""
        return self.remote.accept(client_id, payload)

    def add_invalid_source(self, provider: Callable[[], list[str]]) -> None:
        """Ask ``provider()`` at every report for reasons the run is invalid (empty: none)."""
        self.invalid_sources.append(provider)

    def add_derived_section(self, name: str, provider: Callable[[dict[str, Any]], Any]) -> None:
        """Add a top-level section computed last, from the report's other sections (cost, tiers)."""
        self.derived_sections[name] = provider

    def add_section(self, name: str, provider: Callable[[], Any]) -> None:
        """Add a top-level report section ``name``, computed by ``provider()`` at report time."""
        self.sections[name] = provider

    def report(self, live: bool = False) -> dict[str, Any]:
        """The merged ``loadkit.report/1`` document for everything seen so far. ``live``: for
        a view refreshed every few seconds, whose costly sections may come from an earlier live
        report (LIVE_THROTTLED)."""
        doc = self._report()
        providers: dict[str, Callable[[], Any]] = {
            n: functools.partial(self._section_report, s) for n, s in self.section_defs.items() if s.report
        }
        derived: dict[str, Callable[[], Any]] = {
            n: functools.partial(f, doc) for n, f in self.derived_sections.items()
        }
        for name, provider in {**providers, **self.sections, **derived}.items():
            turns.give_way()
            try:
                if live and name in LIVE_THROTTLED:
                    doc[name] = self._live_section(name, provider)
                    continue
                doc[name] = provider()
            except Exception as exc:  # a broken section must not lose the rest of the report
                self.fail(f"report section {name!r} failed", exc)
                doc["valid"] = False
                doc["invalid_reasons"].append(f"report section {name!r} failed: {exc!r}")
        for name in derived:  # a derived section with nothing to say is left out
            if doc.get(name) is None:
                doc.pop(name, None)
        return doc

    def _live_section(self, name: str, provider: Callable[[], Any]) -> Any:
        """Section ``name`` of a live report: the last live computation's figures while
        recomputing would take over LIVE_SHARE of the time since then."""
        now = self.live_clock()
        held = self._live_sections.get(name)
        if held is not None and (now - held[0]) * LIVE_SHARE < held[1]:
            return held[2]
        value = provider()
        done = self.live_clock()
        self._live_sections[name] = (done, done - now, value)
        return value

    def _section_report(self, section: Section) -> Any:
        return section.report(self.merged_section(section.name))  # type: ignore[misc]

    def _outside_reasons(self) -> list[str]:
        reasons: list[str] = []
        for provider in self.invalid_sources:
            try:
                reasons += provider()
            except Exception as exc:  # the check itself failing is a reason too
                reasons.append(f"a validity check failed: {exc!r}")
        return reasons

    def _report(self) -> dict[str, Any]:
        nodes = [self.local_snapshot(copy_groups=turns.active()), *self.remote.snapshots()]
        manifest = {"started_unix": self.started_wall_ns / 1e9,
                    "stopped_unix": None if self.stopped_wall_ns is None else self.stopped_wall_ns / 1e9,
                    "slos": {s.key: s.limit_ms for s in self.slos}, **self.manifest}  # fmt: skip
        for name, provider in self.manifest_providers.items():
            value = provider()
            if value is not None:
                manifest[name] = value
        return build_report(nodes, manifest=manifest, slos=self.slos, workers=self.remote.describe(),
                            extra_errors=self.remote.rejected, start_wall_ns=self.started_wall_ns,
                            stopped=self.stopped_wall_ns is not None,
                            lost_nodes=[w.snapshot for w in self.remote.lost() if w.snapshot is not None],
                            marked_invalid=self._outside_reasons(), max_failed_share=self.max_failed_share)  # fmt: skip
