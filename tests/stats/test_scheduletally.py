"""The manifest's schedule counts on a distributed master: each worker's final counts of its
share, summed exactly (issue 31: a master held none, so the oracle could not check the asked
side of a distributed trace replay)."""

from __future__ import annotations

import msgpack

from loadkit.run.openloop import Dispatcher
from loadkit.stats import StatsCollector
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.histogram import Histogram
from loadkit.stats.scheduletally import ScheduleTally

MS = 1_000_000


def node() -> tuple[StatsCollector, BuiltinSections]:
    c = StatsCollector()
    sections = BuiltinSections(c)
    sections.install()
    return c, sections


def wire(payload: dict) -> dict:
    return msgpack.unpackb(msgpack.packb(payload), raw=False, strict_map_key=False)


def share(lags_ms: list[int], dropped: int, warmup: int = 0) -> Dispatcher:
    """A worker's dispatcher that sent with these lags and dropped ``dropped`` slots."""
    d = Dispatcher(
        iter([(0.0, "warmup")] * warmup + [(0.0, "main")] * (len(lags_ms) + dropped)), 0.5, t0_ns=0
    )
    for _ in range(warmup):
        t, stage = d.next_slot(now_ns=0)
        d.admit(t, 0, stage)
    for lag in lags_ms:
        t, stage = d.next_slot(now_ns=0)
        assert d.admit(t, lag * MS, stage)
    for _ in range(dropped):
        t, stage = d.next_slot(now_ns=0)
        assert not d.admit(t, 600 * MS, stage)
    return d


def test_a_master_sums_its_workers_final_schedule_counts_exactly():
    master, _ = node()
    lags = [[1, 3, 40, 7], [2, 2, 90, 11, 5]]
    dispatchers = [share(lags[0], dropped=1, warmup=2), share(lags[1], dropped=2)]
    for i, d in enumerate(dispatchers):
        worker, sections = node()
        sections.schedule = ScheduleTally({"sim": d.tally()}, nodes=1)
        assert master.accept_snapshot(f"w{i}", wire(worker.snapshot_payload(final=True))) == "accepted"
    (merged,) = master.report()["manifest"]["schedule"].values()
    # What one process holding the whole schedule would have recorded.
    whole = Dispatcher(iter(()), None)
    for d in dispatchers:
        whole.taken += d.taken
        whole.dropped += d.dropped
        whole.late += d.late
        whole.no_free_user += d.no_free_user
        whole.lag.merge(d.lag)
        for k in whole.warmup:
            whole.warmup[k] += d.warmup[k]
    assert merged == whole.summary()
    assert (merged["scheduled"], merged["sent"], merged["dropped"]) == (12, 9, 3)
    assert merged["warmup"] == {"scheduled": 2, "sent": 2, "dropped": 0}
    one = Histogram()
    for lag in lags[0] + lags[1]:
        one.record(lag * MS)
    assert merged["lag_p90_ms"] == one.percentile(0.9) / 1e6 and merged["lag_max_ms"] == 90


def test_one_process_records_its_own_counts():
    c, sections = node()
    d = share([1, 2, 3], dropped=1)
    sections.schedule = ScheduleTally({"sim": d.tally()}, nodes=1)
    assert c.report()["manifest"]["schedule"] == {"sim": d.summary()}


def test_no_schedule_without_every_workers_final_counts():
    master, _ = node()
    worker, sections = node()
    sections.schedule = ScheduleTally({"sim": share([1], dropped=0).tally()}, nodes=1)
    master.accept_snapshot("w0", wire(worker.snapshot_payload(final=True)))
    early, _ = node()  # a worker lost before its stop: its last snapshot holds no counts
    master.accept_snapshot("w1", wire(early.snapshot_payload()))
    assert "schedule" not in master.report()["manifest"]
    closed, _ = node()  # nor on a closed-loop run's master
    assert "schedule" not in closed.report()["manifest"]
