"""The master's merge on snapshots recorded from a real distributed run
(benchmarks/data/master_payloads.msgpack.gz, made as benchmarks/data/README.md says): the merged
reports are exactly the golden file tests/stats/data/recorded_reports.json.gz, and a decoded
snapshot is held sparse. The golden file was first written (``python -m
tests.stats.test_recorded_snapshots``) before the master's decoding was made cheaper, which
changed nothing in it; when a section's wire version changes, the payloads are recorded again
(benchmarks/data/README.md) and the golden file written again, from the same commit (last:
payload version 4, histograms' buckets packed as bytes; the recording before it, its
histograms packed, merged to its golden reports exactly)."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

import msgpack

from loadkit.stats import Slo, StatsCollector
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.collector import LIVE_SHARE
from loadkit.stats.distributed import decode_snapshot

ROOT = Path(__file__).resolve().parents[2]
PAYLOADS = ROOT / "benchmarks" / "data" / "master_payloads.msgpack.gz"
GOLDEN = Path(__file__).resolve().parent / "data" / "recorded_reports.json.gz"
REPORT_AFTER = (6, 12, 20, 28, 30)  # reports read after this many accepted messages


def recorded() -> list[dict[str, Any]]:
    with gzip.open(PAYLOADS, "rb") as f:
        return list(msgpack.loads(f.read(), raw=False, strict_map_key=False))


def master() -> StatsCollector:
    collector = StatsCollector((Slo("ttft_ms", 1000.0), Slo("tpot_ms", 60.0)))
    BuiltinSections(collector).install()
    collector.reset()
    collector.started_wall_ns = 1_796_408_722_914_293_800  # the recorded run's start (time series' t)
    return collector


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what depends on when the master ran (its own start, the clock)."""
    out = {k: v for k, v in report.items() if k not in ("generated_unix", "manifest", "workers")}
    nodes = [{k: v for k, v in w.items() if k != "last_report_unix"} for w in report["workers"]["nodes"]]
    out["workers"] = {**report["workers"], "nodes": nodes}
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def merged_reports(messages: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every recorded message accepted in arrival order, the merged report read at REPORT_AFTER."""
    collector, reports = master(), []
    for i, message in enumerate(recorded() if messages is None else messages, start=1):
        assert collector.accept_snapshot(message["client_id"], message["data"]["loadkit"]) == "accepted"
        if i in REPORT_AFTER:
            reports.append(_stable(collector.report()))
    return reports


def test_merged_reports_on_recorded_snapshots_are_unchanged():
    with gzip.open(GOLDEN, "rt") as f:
        golden = json.load(f)
    reports = merged_reports()
    assert len(reports) == len(golden) == len(REPORT_AFTER)
    assert reports[-1]["engines"], "the recorded run's requests are in the report"
    for got, expected in zip(reports, golden, strict=True):
        assert got == expected


def cumulative(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded messages with every delivered-load section whole: what each worker would
    have sent if periodic snapshots carried the section whole (payload version 2 did)."""
    held: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for message in messages:
        section = message["data"]["loadkit"]["sections"]["delivered"]
        entries = held.setdefault(message["client_id"], {})
        if section["full"]:
            entries.clear()
        for entry in section["entries"]:
            whole = entries.setdefault((entry["engine"], entry["stage"]), {**entry, "send_us": [], "end_us": [],
                                                                              "scheduled": [], "lag_us": []})  # fmt: skip
            skip, lag_skip = len(whole["send_us"]) - entry["from"], len(whole["lag_us"]) - entry["lag_from"]
            assert skip >= 0 and lag_skip >= 0 and whole["base"] == entry["base"]
            for name in ("send_us", "end_us", "scheduled"):
                whole[name] = whole[name] + entry[name][skip:]
            whole["lag_us"] = whole["lag_us"] + entry["lag_us"][lag_skip:]
            whole.update(classes=entry["classes"], truncated=entry["truncated"])
        section.update(full=True, entries=[{**e, "from": 0, "lag_from": 0} for e in entries.values()])
    return messages


def test_the_recording_made_cumulative_merges_to_the_same_reports():
    """Periodic snapshots carry the delivered-load section as deltas: the master's reports are
    the same, figure for figure, as from whole sections (checked also against the code before
    the deltas, on the recording made cumulative as version 2 payloads: identical)."""
    with gzip.open(GOLDEN, "rt") as f:
        golden = json.load(f)
    messages = cumulative(recorded())
    assert any(not m["data"]["loadkit"]["final"] for m in messages)
    assert merged_reports(messages) == golden


def test_a_live_report_recomputes_the_delivered_load_section_only_when_it_is_cheap_enough():
    """The console table and the web UI build a report every few seconds. On a master of
    hundreds of workers late in a long run the delivered-load section takes seconds: a live
    report then takes it from the last live computation until LIVE_SHARE of the time since
    would pay for it again. The final report, and every live one while it is cheap, is whole."""
    collector, now = master(), [100.0]
    collector.live_clock = lambda: now[0]
    for message in recorded()[:12]:
        collector.accept_snapshot(message["client_id"], message["data"]["loadkit"])
    first = _stable(collector.report(live=True))
    assert first == _stable(collector.report()) and first["delivered"]
    held = collector._live_sections["delivered"]
    collector._live_sections["delivered"] = (held[0], 2.0, held[2])  # as if it had taken 2 s
    for message in recorded()[12:]:
        collector.accept_snapshot(message["client_id"], message["data"]["loadkit"])
    whole = _stable(collector.report())
    assert whole["delivered"] != first["delivered"], "the later snapshots changed the section"
    now[0] += 2.0 / LIVE_SHARE - 1  # not yet 20 times its cost later: the held figures
    live = _stable(collector.report(live=True))
    assert live["delivered"] == first["delivered"]
    assert {k: v for k, v in live.items() if k != "delivered"} == {
        k: v for k, v in whole.items() if k != "delivered"
    }
    now[0] += 2  # past it: computed again
    assert _stable(collector.report(live=True)) == whole
    collector.reset(propagate=False)
    assert collector._live_sections == {}


def test_a_decoded_snapshot_holds_its_histograms_sparse():
    """A master holds one decoded snapshot per worker: its histograms keep their buckets as
    sent (a few dozen each), not as the dense arrays over whole octaves a node records into
    (measured: ~1.6 MB per recorded snapshot dense)."""
    collector = master()
    payload = [m["data"]["loadkit"] for m in recorded() if m["data"]["loadkit"]["final"]][-1]
    tracemalloc.start()
    snapshot = decode_snapshot(payload, collector.section_defs)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert snapshot.groups
    assert held < 600_000, f"a decoded snapshot holds {held} bytes"


if __name__ == "__main__":
    with gzip.open(GOLDEN, "wt") as f:
        json.dump(merged_reports(), f, sort_keys=True)
    print(f"wrote {GOLDEN}")
