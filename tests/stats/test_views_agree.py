"""The same records through every view (engine, label, stage, tenant, user class, session turn,
length bucket) give the same figures wherever the views overlap, and the SLO rule of
stats/metrics.py holds in each: not measured cannot violate, `cancelled` is not judged, any
other failure is judged and not good, `itl_ms` is judged on the largest gap."""

from __future__ import annotations

from types import SimpleNamespace as NS

from loadkit import formulas
from loadkit.records import RequestRecord
from loadkit.stats import StatsCollector, meets
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.distributed import RemoteSnapshots
from loadkit.stats.runcontext import RunContext
from tests.helpers.records import record

PLAN = [{"name": "s1", "level": 4, "level_kind": "users", "duration_s": 10.0}]


def collector(slos: dict[str, float]) -> StatsCollector:
    """A collector with the built-in sections, as a run installs them (stats/builtin.py)."""
    c = StatsCollector()
    tenants = [NS(name="acme", priority=None, slos=None, arrival=None)]
    sections = BuiltinSections(c, RunContext(plan=tuple(PLAN), staged=True, tenants=tuple(tenants)))
    sections.install()
    c.set_slos(slos)
    c.reset()
    return c


def tagged(r: RequestRecord) -> RequestRecord:
    r.stage, r.user_class, r.turn = "s1", "Chat", 1
    return r


def feed(c: StatsCollector, records: list[RequestRecord]) -> dict:
    for r in records:
        c.add(tagged(r))
    return c.report()


def good_judged(report: dict) -> dict[str, tuple[int, int]]:
    """(good, judged) as every view that judges SLOs shows it."""
    engine = report["engines"]["e"]
    tenant = report["tenants"]["by_target"]["e"]["tenants"]["acme"]
    cls = report["user_classes"]["Chat"]
    stage = report["stages"]["e"]["stages"][0]["stats"]
    return {
        "engine": (engine["slo"]["good"], engine["slo"]["judged"]),
        "label": (
            engine["labels"]["acme/chat"]["slo"]["good"],
            engine["labels"]["acme/chat"]["slo"]["judged"],
        ),
        "tenant": (tenant["good"], tenant["judged"]),
        "user class": (cls["slo"]["good"], cls["slo"]["judged"]),
        "user class engine": (cls["engines"]["e"]["slo"]["good"], cls["engines"]["e"]["slo"]["judged"]),
        # The stage table shows the share; the counts behind it are the same or this differs.
        "stage share": stage["slo_attainment"],
    }


def test_counter_example_one_token_reply_and_a_cancelled_request_is_one_of_one_everywhere():
    one_token = record(label="acme/chat", gaps_ms=())  # ok, one event: TPOT not measured
    cancelled = record(label="acme/chat", outcome="cancelled", send_ms=5.0)
    report = feed(collector({"tpot_ms": 50.0}), [one_token, cancelled])
    views = good_judged(report)
    assert views.pop("stage share") == 1.0
    assert views == dict.fromkeys(views, (1, 1))
    assert meets(one_token, {"tpot_ms": 50.0}) is True and meets(cancelled, {"tpot_ms": 50.0}) is None
    attainment = report["engines"]["e"]["slo"]["attainment"]["tpot_ms"]
    assert (attainment["met"], attainment["violated"], attainment["not_measured"]) == (0, 0, 1)


def mixed() -> list[tuple[RequestRecord, bool | None]]:
    """Records with the verdict each must get under SLOS, worked out by hand."""
    return [
        (record(label="acme/chat", ttft_ms=100.0, gaps_ms=(10.0, 10.0)), True),
        (record(label="acme/chat", ttft_ms=900.0, gaps_ms=(10.0,)), False),  # TTFT over 500
        (record(label="acme/chat", ttft_ms=100.0, gaps_ms=(60.0, 70.0)), False),  # TPOT 65 > 50
        (
            record(label="acme/chat", ttft_ms=100.0, gaps_ms=(1.0, 1.0, 1.0, 1.0, 150.0)),
            False,
        ),  # one 150 ms stall
        (record(label="acme/chat", ttft_ms=100.0, gaps_ms=()), True),  # 1 token: TPOT, ITL not measured
        (record(label="acme/chat", ttft_ms=None, gaps_ms=()), True),  # ok with no event: nothing measured
        (record(label="acme/chat", outcome="http_error", ttft_ms=None), False),
        (record(label="acme/chat", outcome="timeout", ttft_ms=50.0), False),
        (record(label="acme/chat", outcome="cancelled", ttft_ms=50.0), None),
        (
            record(label="acme/chat", ttft_ms=100.0, gaps_ms=(80.0,), tokens=(1, 4)),
            True,
        ),  # gap at the ITL limit
    ]


SLOS = {"ttft_ms": 500.0, "tpot_ms": 50.0, "itl_ms": 80.0}


def test_every_view_judges_each_request_the_same_way():
    cases = mixed()
    assert [meets(r, SLOS) for r, _ in cases] == [want for _, want in cases]
    good = sum(want is True for _, want in cases)
    judged = sum(want is not None for _, want in cases)
    views = good_judged(feed(collector(SLOS), [r for r, _ in cases]))
    assert views.pop("stage share") == good / judged  # the same integers: exactly
    assert views == dict.fromkeys(views, (good, judged)), views


def test_views_agree_on_counts_and_percentiles_where_they_overlap():
    records = [record(label="acme/chat", ttft_ms=20.0 + 7 * i, gaps_ms=(5.0 + i % 4,) * (1 + i % 5), n_in=50 + 13 * i)
               for i in range(60)]  # fmt: skip
    records += [record(label="acme/chat", outcome="http_error", ttft_ms=None, n_in=30)]
    report = feed(collector(SLOS), records)
    engine = report["engines"]["e"]
    stage = report["stages"]["e"]["stages"][0]["stats"]
    turn = report["sessions"]["e"]["turns"]["1"]
    cls = report["user_classes"]["Chat"]
    lengths = report["lengths"]["by_target"]["e"]
    tenant = report["tenants"]["by_target"]["e"]["tenants"]["acme"]
    for view in (stage, turn, cls, tenant):
        assert (view["requests"], view["ok"]) == (engine["requests"], engine["ok"]) == (61, 60)
    assert lengths["input_server"]["count"] == engine["n_in"]["count"] == 61
    assert (
        lengths["input_server"]["p50"] == engine["n_in"]["p50"]
        and lengths["input_server"]["max"] == engine["n_in"]["max"]
    )
    for q in ("p50", "p90", "p99"):
        # Same population (the ok requests' TTFT), the same ns values (loadkit.formulas) in
        # the same histograms: the same figure, exactly.
        assert cls["ttft_ms"][q] == engine["ttft_ms"][q]
        assert turn["ttft_ms"][q] == engine["ttft_ms"][q]
        assert stage["ttft_ms"][q] == engine["ttft_ms"][q]
        assert stage["tpot_ms"][q] == engine["tpot_ms"][q]
        assert stage["e2e_ms"][q] == engine["e2e_ms"][q]
        assert tenant["parts"]["chat"]["ttft_ms"][q] == engine["ttft_ms"][q]
    assert stage["output_tokens"] == cls["output_tokens"] == engine["output_tokens"]


def test_sections_travel_in_the_main_snapshot_and_a_lost_workers_last_one_counts():
    """Worker → master through encode/accept: the sections ride the versioned snapshot; a
    worker marked lost keeps its last snapshot's sections; a stale one is dropped."""
    worker, master = collector(SLOS), collector(SLOS)
    for r, _ in mixed():
        worker.add(tagged(r))
    first = worker.snapshot_payload()
    assert set(first["sections"]) >= {"stages", "sessions", "lengths", "user_classes", "delivered", "tenants"}
    worker.add(tagged(record(label="acme/chat")))
    second = worker.snapshot_payload()
    assert master.accept_snapshot("w1", second) == "accepted"
    assert master.accept_snapshot("w1", first) == "stale"  # older, arriving late: ignored
    assert master.remote.mark_lost("w1", "heartbeat missing")
    report = master.report()
    assert report["workers"]["lost"] == 1
    views = good_judged(report)
    share = views.pop("stage share")
    assert views == dict.fromkeys(views, (5, 10)) and share == 5 / 10
    assert report["user_classes"]["Chat"]["requests"] == report["engines"]["e"]["requests"] == 11


def test_a_reset_clears_every_section_and_older_epochs_are_stale():
    worker, master = collector(SLOS), collector(SLOS)
    worker.add(tagged(record(label="acme/chat")))
    before = worker.snapshot_payload()
    assert master.accept_snapshot("w1", before) == "accepted"
    master.reset(propagate=False)
    worker.reset(propagate=False)
    assert master.accept_snapshot("w1", before) == "stale"
    assert master.accept_snapshot("w1", worker.snapshot_payload(final=True)) == "accepted"
    report = master.report()
    assert report["stages"] == report["user_classes"] == report["sessions"] == {}
    assert report["lengths"]["by_target"] == {} and report["tenants"]["by_target"] == {}


def test_a_malformed_section_rejects_the_snapshot_and_says_which_worker():
    worker, master = collector(SLOS), collector(SLOS)
    worker.add(tagged(record(label="acme/chat")))
    payload = worker.snapshot_payload()
    payload["sections"]["stages"] = {"v": 99, "cells": []}
    assert master.accept_snapshot("w7", payload) == "rejected"
    assert any("w7" in e and "stage stats payload version 99" in e for e in master.remote.rejected)


def test_remote_snapshots_without_sections_still_decode():
    """An engine-only peer (no sections registered) and a payload without the key both work."""
    remote = RemoteSnapshots()
    worker = collector(SLOS)
    worker.add(tagged(record(label="acme/chat")))
    payload = worker.snapshot_payload()
    assert remote.accept("w1", payload) == "accepted"
    assert remote.snapshots()[0].sections == {}
    del payload["sections"]
    payload["seq"] += 1
    assert remote.accept("w1", payload) == "accepted"


def test_a_requests_metrics_are_computed_once_for_every_view_and_the_raw_log(monkeypatch, tmp_path):
    """One RequestMetrics per finished record (RequestRecord.measure, in the collector): the
    engine stats, every section and the raw-log line read it; none computes again."""
    from loadkit.stats.rawlog import RawLog

    made: list[int] = []
    original = formulas.RequestMetrics.of.__func__  # type: ignore[attr-defined]

    def counted(cls, r):
        made.append(1)
        return original(cls, r)

    c = collector(SLOS)
    c.raw_log = RawLog(str(tmp_path / "requests.jsonl"))
    cases = [r for r, _ in mixed()]
    monkeypatch.setattr(formulas.RequestMetrics, "of", classmethod(counted))
    for r in cases:
        c.add(tagged(r))
    assert len(made) == len(cases)
    c.raw_log.close()
    report = c.report()
    assert len(made) == len(cases), "a report built later computes nothing again"
    assert report["engines"]["e"]["requests"] == len(cases)


def test_slo_values_are_in_slo_keys_order():
    from loadkit.stats.metrics import SLO_KEYS

    r = record(ttft_ms=100.0, gaps_ms=(10.0, 30.0), sched_ms=-5.0)
    r.t_first_answer_ns, r.t_last_answer_ns, r.n_answer = r.event_t_ns[1], r.event_t_ns[2], 2
    m = r.measure()
    by_name = {"ttft_ms": m.ttft_ns, "ttft_sched_ms": m.ttft_sched_ns, "tpot_ms": m.tpot_ns, "e2e_ms": m.e2e_ns,
               "itl_ms": m.itl_max_ns, "ttfat_ms": m.ttfat_ns, "answer_tpot_ms": m.answer_tpot_ns,
               "latency_ms": None, "latency_per_item_ms": None}  # fmt: skip
    assert dict(zip(SLO_KEYS, m.slo_values, strict=True)) == by_name
    assert None not in m.slo_values[:7] and m.itl_max_ns == 30 * 1_000_000
