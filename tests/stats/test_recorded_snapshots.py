"""The master's merge on snapshots recorded from a real distributed run
(benchmarks/data/master_payloads.msgpack.gz, made as benchmarks/data/README.md says): the merged
reports are exactly the golden file tests/stats/data/recorded_reports.json.gz, and a decoded
snapshot is held sparse. The golden file was first written (``python -m
tests.stats.test_recorded_snapshots``) before the master's decoding was made cheaper, which
changed nothing in it; when a section's wire version changes, the payloads are recorded again
(benchmarks/data/README.md) and the golden file written again, from the same commit."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

import msgpack

from loadkit.stats import Slo, StatsCollector
from loadkit.stats.builtin import BuiltinSections
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
    collector.started_wall_ns = 1_796_223_684_000_000_000  # the recorded run's start (time series' t)
    return collector


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what depends on when the master ran (its own start, the clock)."""
    out = {k: v for k, v in report.items() if k not in ("generated_unix", "manifest", "workers")}
    nodes = [{k: v for k, v in w.items() if k != "last_report_unix"} for w in report["workers"]["nodes"]]
    out["workers"] = {**report["workers"], "nodes": nodes}
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def merged_reports() -> list[dict[str, Any]]:
    """Every recorded message accepted in arrival order, the merged report read at REPORT_AFTER."""
    collector, reports = master(), []
    for i, message in enumerate(recorded(), start=1):
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
