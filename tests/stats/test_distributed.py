"""Worker snapshots → master: exact merge, stale and duplicate seq, resets, lost workers."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadkit.stats import Slo, StatsCollector
from loadkit.stats.distributed import PAYLOAD_VERSION, RemoteSnapshots
from tests.helpers.records import BASE, record


def _wire(payload: dict) -> dict:
    """What Locust's msgpack transport makes of a payload."""
    return msgpack.unpackb(msgpack.packb(payload), raw=False, strict_map_key=False)


def _records(n: int, offset: int = 0) -> list:
    return [
        record(send_ms=i * 7, ttft_ms=50 + (i * 37) % 400, label=f"l{i % 3}")
        for i in range(offset, offset + n)
    ]


def test_two_workers_merge_to_exactly_one_collector_fed_everything():
    everything, master = StatsCollector(), StatsCollector()
    workers = [StatsCollector(), StatsCollector()]
    for i, r in enumerate(_records(600)):
        workers[i % 2].add(r)
        everything.add(r)
    for i, w in enumerate(workers):
        w.worker_index = i
        assert master.accept_snapshot(f"w{i}", _wire(w.snapshot_payload(final=True))) == "accepted"
    merged, single = master.report(), everything.report()
    assert merged["engines"] == single["engines"]
    assert merged["conservation"] == single["conservation"]
    assert merged["workers"]["count"] == 2 and merged["valid"]


def test_snapshots_are_cumulative_so_a_missed_one_costs_nothing():
    worker, master = StatsCollector(), StatsCollector()
    for r in _records(100):
        worker.add(r)
    worker.snapshot_payload()  # Locust cleared / lost this interval: never delivered
    for r in _records(100, 100):
        worker.add(r)
    master.accept_snapshot("w", worker.snapshot_payload())
    assert master.report()["engines"]["e"]["requests"] == 200


def test_older_and_duplicate_sequence_numbers_are_ignored():
    worker, master = StatsCollector(), StatsCollector()
    worker.add(record())
    old = worker.snapshot_payload()
    worker.add(record())
    new = worker.snapshot_payload()
    assert master.accept_snapshot("w", new) == "accepted"
    assert master.accept_snapshot("w", old) == "stale"
    assert master.accept_snapshot("w", new) == "stale"
    assert master.report()["engines"]["e"]["requests"] == 2


def test_pre_reset_snapshots_are_dropped_after_a_reset():
    worker, master = StatsCollector(), StatsCollector()
    worker.add(record())
    before = worker.snapshot_payload()
    master.accept_snapshot("w", before)
    master.reset()  # new run on the master ...
    late = dict(before, seq=before["seq"] + 100)  # ... and a pre-reset report arriving late
    assert master.accept_snapshot("w", late) == "stale"
    worker.reset()  # the worker's own test_start
    worker.add(record(engine="new"))
    assert master.accept_snapshot("w", worker.snapshot_payload()) == "accepted"
    assert set(master.report()["engines"]) == {"new"}


def test_lost_worker_keeps_its_last_snapshot_and_the_report_says_so():
    master, alive, dying = StatsCollector(), StatsCollector(), StatsCollector()
    dying.worker_index, alive.worker_index = 1, 0
    for r in _records(50):
        alive.add(r)
        dying.add(r)
    dying.add_scheduled(53)  # 50 finished + 3 in flight when it died
    alive.add_scheduled(50)
    master.mark_stopped()
    master.accept_snapshot("dying", dying.snapshot_payload())
    master.accept_snapshot("alive", alive.snapshot_payload(final=True))
    assert master.remote.mark_lost("dying", "heartbeat missing", now=1234.5)
    assert not master.remote.mark_lost("alive", "heartbeat missing")  # final already: not lost
    report = master.report()
    assert report["engines"]["e"]["requests"] == 100  # both workers' data kept
    assert report["valid"] is False and report["workers"]["lost"] == 1
    lost = [w for w in report["workers"]["nodes"] if w["status"] == "lost"]
    assert lost == [{"client_id": "dying", "index": 1, "status": "lost", "last_seq": 1, "epoch": 0,
                     "last_report_unix": lost[0]["last_report_unix"], "lost_at_unix": 1234.5,
                     "lost_reason": "heartbeat missing", "recovered": 0}]  # fmt: skip
    assert any("lost" in w and "worker 1" in w for w in report["warnings"])
    cons = report["conservation"]
    assert (cons["in_flight"], cons["lost_in_flight"], cons["holds"]) == (3, 3, True)


def test_a_lost_worker_that_reports_again_recovers():
    master, worker = StatsCollector(), StatsCollector()
    worker.add(record())
    master.accept_snapshot("w", worker.snapshot_payload())
    master.remote.mark_lost("w", "heartbeat missing")
    worker.add(record())
    master.accept_snapshot("w", worker.snapshot_payload(final=True))
    report = master.report()
    assert report["workers"]["lost"] == 0 and report["workers"]["nodes"][0]["recovered"] == 1
    assert report["engines"]["e"]["requests"] == 2


def test_pending_finals_and_lost_workers():
    remote = RemoteSnapshots()
    worker = StatsCollector()
    remote.accept("a", worker.snapshot_payload())
    remote.accept("b", worker.snapshot_payload(final=True))
    assert remote.pending_finals() == ["a"]
    remote.mark_lost("a", "no final")
    assert remote.pending_finals() == []


def test_unknown_payload_version_is_rejected_and_makes_the_report_invalid():
    master, worker = StatsCollector(), StatsCollector()
    worker.add(record())
    payload = worker.snapshot_payload()
    payload["v"] = PAYLOAD_VERSION + 1
    assert master.accept_snapshot("w", payload) == "rejected"
    report = master.report()
    assert not report["valid"] and "version" in report["errors"][0]


def test_worker_errors_and_warnings_reach_the_master_report():
    master, worker = StatsCollector(), StatsCollector()
    worker.fail("boom")
    worker.warn("client was the bottleneck")
    master.accept_snapshot("w", worker.snapshot_payload())
    report = master.report()
    assert report["errors"] == ["boom"] and "client was the bottleneck" in report["warnings"]
    assert report["valid"] is False


@pytest.mark.parametrize("final", [False, True])
def test_payload_is_versioned_and_numbered(final):
    worker = StatsCollector()
    worker.worker_index = 3
    first, second = worker.snapshot_payload(), worker.snapshot_payload(final=final)
    assert (first["v"], first["seq"], second["seq"], second["worker"], second["final"]) == (
        PAYLOAD_VERSION,
        1,
        2,
        3,
        final,
    )


def test_periodic_snapshots_carry_only_changed_series_rows_and_merge_to_the_same_series():
    worker, master = StatsCollector(), StatsCollector()
    sizes = []
    for batch in range(6):  # six report intervals, each 10 s of requests
        for i in range(20):
            worker.add(record(send_ms=batch * 10_000 + i * 500))
        payload = worker.snapshot_payload()
        sizes.append(len(payload["groups"][0][2]["series"]))
        if batch != 3:  # one periodic snapshot never applied: the next one re-sends its rows
            master.accept_snapshot("w", _wire(payload))
    assert max(sizes) <= 2 * 11  # this interval's rows and the previous interval's, not all 60 s
    assert master.report()["engines"]["e"]["timeseries"] == worker.report()["engines"]["e"]["timeseries"]
    master.accept_snapshot("w", _wire(worker.snapshot_payload(final=True)))  # final: every row
    assert master.report()["engines"]["e"]["timeseries"] == worker.report()["engines"]["e"]["timeseries"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from(["x", "y"]),
            st.sampled_from(["ok", "ok", "ok", "timeout_total", "cancelled"]),
            st.floats(0.01, 5000.0),
            st.lists(st.floats(0.0, 300.0), max_size=8),
            st.integers(0, 2),
        ),
        max_size=60,
    )
)
def test_any_split_over_workers_merges_to_the_single_process_report(specs):
    def node() -> StatsCollector:  # one shared clock: real processes differ by µs in wall offset
        return StatsCollector(
            (Slo("ttft_ms", 100.0),), wall_clock_ns=lambda: 2 * BASE, mono_clock_ns=lambda: BASE
        )

    everything, master = node(), node()
    workers = [node() for _ in range(3)]
    for i, (engine, label, outcome, ttft, gaps, worker) in enumerate(specs):
        r = record(
            engine=engine, label=label, outcome=outcome, send_ms=i * 37.0, ttft_ms=ttft, gaps_ms=tuple(gaps)
        )
        workers[worker].add(r)
        everything.add(r)
    for i, w in enumerate(workers):
        w.snapshot_payload()  # an earlier periodic snapshot, superseded below
        master.accept_snapshot(f"w{i}", _wire(w.snapshot_payload(final=i == 0)))
    assert master.report()["engines"] == everything.report()["engines"]


def test_delivered_load_travels_as_deltas_and_the_master_holds_the_whole():
    """Periodic snapshots carry the delivered-load section's new requests only (of the last two
    intervals); the master's state of the worker equals the worker's whole section."""
    from loadkit.stats.builtin import BuiltinSections
    from loadkit.stats.delivered import DeliveredLoad

    worker, master = StatsCollector(), StatsCollector()
    for c in (worker, master):
        BuiltinSections(c).install()
    sizes = []
    for batch in range(5):
        for i in range(30):
            worker.add(record(send_ms=batch * 3_000 + i * 90))
        payload = _wire(worker.snapshot_payload())
        sizes.append(sum(len(e["send_us"]) for e in payload["sections"]["delivered"]["entries"]))
        assert master.accept_snapshot("w", payload) == "accepted"
        held = master.remote.workers["w"].snapshot.sections["delivered"]
        whole = DeliveredLoad.from_wire(_wire(worker.section("delivered").to_wire()))
        assert (held.sends, held.ends, held.scheduled, held.lags) == (
            whole.sends,
            whole.ends,
            whole.scheduled,
            whole.lags,
        )
    assert sizes == [30, 60, 60, 60, 60]  # the first one whole, then two intervals each
    final = _wire(worker.snapshot_payload(final=True))
    assert final["sections"]["delivered"]["full"] and master.accept_snapshot("w", final) == "accepted"
    assert len(master.merged_section("delivered").sends[("e", "run")]) == 150


def test_a_version_3_snapshot_is_refused_by_a_version_4_master():
    """Version 3 sent a histogram's buckets as lists; version 4 packs them as bytes: a master
    refuses the older snapshot by its version (not by failing on its histograms)."""
    worker, master = StatsCollector(), StatsCollector()
    worker.add(record())
    payload = dict(_wire(worker.snapshot_payload()), v=3)
    assert PAYLOAD_VERSION == 4 and master.accept_snapshot("w", payload) == "rejected"
    assert "version 3" in master.report()["errors"][0]


def test_a_version_2_snapshot_is_refused_by_a_newer_master():
    """Version 2 sent the delivered-load section whole as a list; a master of version 3 (and on) reads
    a periodic section as a delta, so mixing the two would miscount: refused by its version."""
    worker, master = StatsCollector(), StatsCollector()
    worker.add(record())
    payload = dict(_wire(worker.snapshot_payload()), v=2)
    assert PAYLOAD_VERSION == 4 and master.accept_snapshot("w", payload) == "rejected"
    assert "version 2" in master.report()["errors"][0]
